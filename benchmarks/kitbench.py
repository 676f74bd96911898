"""What every kit benchmark shares, standard library only (mpi4py imported when present).

Rank and size come from the launcher's environment (MPICH/Hydra, Open MPI or
Slurm), so a benchmark runs the same under mpirun, srun or alone, natively and
in every image. Each benchmark's rank 0 prints one JSON record of schema
kit.bench/1 on stdout (`emit`) and a one-line summary on stderr.
"""

from __future__ import annotations  # Python 3.9 in the Caffe2 images

import argparse
import json
import os
import platform
import resource
import socket
import sys

SCHEMA = "kit.bench/1"
RANK_VARS = (
    ("PMI_RANK", "PMI_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
)
LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE")


def launcher_rank() -> tuple[int, int]:
    for rank, size in RANK_VARS:
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    return 0, 1


def local_size(size: int) -> int:
    for var in LOCAL_SIZE_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return size


def threads_per_rank(requested: int, size: int) -> int:
    """--threads, else OMP_NUM_THREADS, else the cores shared among this node's ranks."""
    omp = os.environ.get("OMP_NUM_THREADS", "")
    return (
        requested
        or (int(omp) if omp.isdigit() else 0)
        or max(1, (os.cpu_count() or 1) // local_size(size))
    )


def mpi_library() -> str:
    """The MPI library actually loaded (first line), without initialising MPI: init and
    finalize are explicit (mpi_comm(), finalize()) so shutdown order is fixed."""
    try:
        import mpi4py

        mpi4py.rc.initialize = False
        from mpi4py import MPI

        return " ".join(MPI.Get_library_version().strip().splitlines()[0].split())
    except ImportError:
        return "none"


def mpi_comm():
    """MPI.COMM_WORLD, initialised (call mpi_library() first)."""
    from mpi4py import MPI

    if not MPI.Is_initialized():
        MPI.Init_thread()
    return MPI.COMM_WORLD


def finalize() -> None:
    from mpi4py import MPI

    if MPI.Is_initialized() and not MPI.Is_finalized():
        MPI.COMM_WORLD.Barrier()
        MPI.Finalize()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def common_args(p: argparse.ArgumentParser, models: list[str]) -> None:
    p.add_argument("--model", default="tiny", help=f"one of {', '.join(models)}")
    p.add_argument("--batch-size", type=int, default=32, help="images per rank per step")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="intra-op threads per rank (default: OMP_NUM_THREADS, else cores / local ranks)",
    )
    p.add_argument(
        "--launch-time",
        type=float,
        default=None,
        help="epoch seconds when the launcher started (for start-up latency)",
    )


def check_args(p: argparse.ArgumentParser, a: argparse.Namespace, models: list[str]) -> None:
    if a.model not in models:
        p.error(f"unknown model '{a.model}'; choose one of {', '.join(models)}")
    for name in ("batch_size", "steps"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.warmup < 0:
        p.error("--warmup must be 0 or more")


def rank_figures(rank: int, batch_size: int, step_times: list[float], startup_s: float) -> dict:
    return {
        "rank": rank,
        "host": socket.gethostname(),
        "timed_s": sum(step_times),
        "images_per_sec": batch_size * len(step_times) / sum(step_times),
        "peak_rss_mb": peak_rss_mb(),
        "startup_s": startup_s,
    }


def record(
    bench: str,
    framework: str,
    version: str,
    mpi: str,
    a: argparse.Namespace,
    ranks: list[dict],
    threads: int,
    step_times: list[float],
    losses: list[float],
    **extra,
) -> dict:
    """The kit.bench/1 record from every rank's figures (rank_figures), gathered on rank 0."""
    size = len(ranks)
    slowest = max(r["timed_s"] for r in ranks)
    return {
        "schema": SCHEMA,
        "bench": bench,
        "framework": framework,
        "framework_version": version,
        "mpi_library": mpi,
        "python": platform.python_version(),
        "image": os.environ.get("KIT_IMAGE", "native"),
        "model": a.model,
        "batch_size": a.batch_size,
        "data": "synthetic",
        "ranks": size,
        "threads_per_rank": threads,
        "warmup_steps": a.warmup,
        "steps": a.steps,
        "images_per_sec": a.batch_size * size * a.steps / slowest,
        "images_per_sec_per_rank": [r["images_per_sec"] for r in ranks],
        "peak_rss_mb": [r["peak_rss_mb"] for r in ranks],
        "startup_s": max(r["startup_s"] for r in ranks),
        "step_times_s": step_times,
        "loss": losses,
        "hosts": sorted({r["host"] for r in ranks}),
        **extra,
    }


def emit(rec: dict) -> None:
    print(json.dumps(rec), flush=True)
    print(
        f"{rec['bench']} {rec['model']} bs={rec['batch_size']} ranks={rec['ranks']}: "
        f"{rec['images_per_sec']:.1f} images/s, start-up {rec['startup_s']:.2f} s",
        file=sys.stderr,
        flush=True,
    )
