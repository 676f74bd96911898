#!/usr/bin/env python3
"""PyTorch synthetic-data CNN training benchmark (DDP over Gloo under any MPI launcher).

Runs the same way natively and inside every image. Rank and size come from the
launcher's environment (MPICH/Hydra, Open MPI or Slurm); with several ranks the
Gloo rendezvous address is agreed through MPI (mpi4py), so no extra port or
shared file is needed. Rank 0 prints one JSON record (schema kit.bench/1) on
stdout and a one-line summary on stderr. Depends on torch (and mpi4py for >1 rank).
"""

import argparse
import json
import os
import platform
import resource
import socket
import sys
import time

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


def mpi_library() -> str:
    """The MPI library actually loaded (first line), without initialising MPI: init and
    finalize are explicit (rendezvous(), end of main()) so shutdown order is fixed."""
    try:
        import mpi4py

        mpi4py.rc.initialize = False
        from mpi4py import MPI

        return " ".join(MPI.Get_library_version().strip().splitlines()[0].split())
    except ImportError:
        return "none"


def rendezvous(rank: int) -> tuple[str, int]:
    """Rank 0's address and a free port, shared with every rank through MPI."""
    from mpi4py import MPI  # imported by mpi_library() with automatic init off

    MPI.Init_thread()
    comm = MPI.COMM_WORLD
    host = socket.gethostname()
    port = 0
    if rank == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
    root_host, port = comm.bcast((host, port), root=0)
    addr = "127.0.0.1" if root_host == host else socket.gethostbyname(root_host)
    return addr, port


def build_model(name: str, classes: int):
    import torch.nn as nn

    if name == "tiny":
        return nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(32, classes),
        )
    raise ValueError(name)


MODELS = {"tiny": 32}  # model -> input image side


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tiny", help=f"one of {', '.join(MODELS)}")
    p.add_argument("--batch-size", type=int, default=32, help="images per rank per step")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="intra-op threads per rank (default: cores / local ranks)",
    )
    p.add_argument(
        "--launch-time",
        type=float,
        default=None,
        help="epoch seconds when the launcher started (for start-up latency)",
    )
    a = p.parse_args(argv)
    if a.model not in MODELS:
        p.error(f"unknown model '{a.model}'; choose one of {', '.join(MODELS)}")
    for name in ("batch_size", "steps"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.warmup < 0:
        p.error("--warmup must be 0 or more")
    return a


def main(argv: list[str] | None = None) -> int:
    t_start = time.time()
    a = parse_args(argv)
    launch = a.launch_time or t_start
    rank, size = launcher_rank()
    mpi = mpi_library()
    import torch
    import torch.distributed as dist

    threads = a.threads or max(1, (os.cpu_count() or 1) // local_size(size))
    torch.set_num_threads(threads)
    torch.manual_seed(1234 + rank)
    if size > 1:
        addr, port = rendezvous(rank)
        dist.init_process_group(
            "gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=size
        )
    classes = 10
    model = build_model(a.model, classes)
    if size > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    side = MODELS[a.model]
    x = torch.randn(a.batch_size, 3, side, side)
    y = torch.randint(0, classes, (a.batch_size,))
    step_times, losses, first_step_end = [], [], None
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if first_step_end is None:
            first_step_end = time.time()
        if i >= a.warmup:
            step_times.append(dt)
            losses.append(float(loss))
    mine = {
        "rank": rank,
        "host": socket.gethostname(),
        "timed_s": sum(step_times),
        "images_per_sec": a.batch_size * a.steps / sum(step_times),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "startup_s": first_step_end - launch,
    }
    ranks = [mine]
    if size > 1:
        ranks = [None] * size
        dist.all_gather_object(ranks, mine)
        dist.barrier()
        # No destroy_process_group(): in torch 1.13 the Gloo group's destructor can
        # deadlock (it waits for the group's mutex holding the GIL, while a worker
        # holding the mutex waits for the GIL to free a tensor). The process leaves
        # through os._exit below, so nothing is torn down.
        from mpi4py import MPI

        MPI.COMM_WORLD.Barrier()
        MPI.Finalize()
    if rank != 0:
        return 0
    slowest = max(r["timed_s"] for r in ranks)
    record = {
        "schema": SCHEMA,
        "bench": "torch-cnn",
        "framework": "torch",
        "framework_version": torch.__version__,
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
    }
    print(json.dumps(record), flush=True)
    print(
        f"torch-cnn {a.model} bs={a.batch_size} ranks={size}: "
        f"{record['images_per_sec']:.1f} images/s, start-up {record['startup_s']:.2f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Interpreter teardown would run the Gloo group's destructor, which can deadlock
    # (see main); everything is measured and written by now, so leave without it.
    os._exit(code)
