"""What every kit benchmark shares, standard library only (mpi4py, numpy, PIL when asked).

Rank and size come from the launcher's environment (MPICH/Hydra, Open MPI or
Slurm), so a benchmark runs the same under mpirun, srun or alone, natively and
in every image. Each benchmark's rank 0 prints one JSON record of schema
kit.bench/2 on stdout (`emit`, with the launch's fingerprint: fingerprint.py) and a
one-line summary on stderr; what a record holds is declared in kitschema, beside this file.
"""

from __future__ import annotations  # Python 3.9 in the Caffe2 images

import argparse
import contextlib
import ctypes
import faulthandler
import io
import json
import math
import os
import platform
import re
import resource
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable

import fingerprint
import mllog_lines
from kitschema import BENCHES, DATASET_STAMP, SCHEMA

OOM_EXIT = 3  # a run that failed for lack of memory: a result, not a crash
RANK_VARS = (
    ("PMI_RANK", "PMI_SIZE"),
    # MPICH's Hydra under -pmi-port gives a rank its id (the rank) and no size, which kit
    # passes in (Podman under --hosts: a container per rank)
    ("PMI_ID", "PMI_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
)
LOCAL_SIZE_VARS = (
    "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE"
)  # fmt: skip
CLASSES = 10
MODELS = {  # model -> input image side; each framework builds those it has
    "tiny": 32,
    "alexnet": 224,
    "resnet50": 224,
    "resnet101": 224,
    "resnet152": 224,
    "inception3": 299,
}

# kit sends SIGUSR1 to a rank that outlives --timeout (runner/kit/launch/process.py): every
# thread's Python stack goes to stderr and into the trial's record. (The unit tests import
# the scripts to check their MODELS, sometimes with a stderr that is no file: no dump then.)
with contextlib.suppress(io.UnsupportedOperation):
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def under_torchrun() -> bool:
    """Started by torchrun (PyTorch's launcher): ranks and rendezvous are its, not MPI's."""
    return "TORCHELASTIC_RUN_ID" in os.environ


def launcher_rank() -> tuple[int, int]:
    if under_torchrun():
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    for rank, size in RANK_VARS:
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    return 0, 1


LOCAL_RANK_VARS = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK")


def _first_number(names: tuple[str, ...], default: int) -> int:
    """The first of the launchers' variables that is set to a number, else default."""
    for var in names:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return default


def local_rank() -> int:
    """This rank's number among its node's ranks (which GPU it takes), 0 when unknown."""
    return _first_number(LOCAL_RANK_VARS, 0)


def local_size(size: int) -> int:
    return _first_number(LOCAL_SIZE_VARS, size)


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


FINALIZE_WAIT_S = 30.0


def finalize() -> None:
    """Barrier, then MPI_Finalize under a watchdog. Rarely (a few times in many hundred
    2-rank trials, MPICH 4.0 in Docker) both ranks spin in MPI_Finalize after the barrier;
    the record is printed before this is called, so a rank still here after
    FINALIZE_WAIT_S leaves with a note instead of hanging the trial. mpi4py's Finalize
    holds the GIL, which would starve the watchdog's thread: MPI_Finalize is called
    through ctypes, which releases it."""
    from mpi4py import MPI

    if MPI.Is_initialized() and not MPI.Is_finalized():
        MPI.COMM_WORLD.Barrier()
        watchdog = threading.Timer(FINALIZE_WAIT_S, _leave_unfinalized)
        watchdog.daemon = True
        watchdog.start()
        lib = loaded_mpi_library()
        if lib is None:
            MPI.Finalize()
        else:
            lib.MPI_Finalize()
        watchdog.cancel()


def loaded_mpi_library() -> ctypes.CDLL | None:
    """The MPI library mpi4py loaded into this process (MPICH's libmpich, Open MPI's
    libmpi), from the process's own memory map; None where there is no such map."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/lib" in line}
    except OSError:
        return None
    for path in sorted(paths):
        if re.search(r"/lib(mpi|mpich)\.so", path):
            return ctypes.CDLL(path)
    return None


def _leave_unfinalized() -> None:
    print(
        f"kitbench: MPI_Finalize did not return in {FINALIZE_WAIT_S:g} s after the final "
        "barrier; leaving without it (everything was measured and printed before)",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    os._exit(0)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def common_args(p: argparse.ArgumentParser, models: dict[str, int]) -> None:
    p.add_argument("--model", default="tiny", help=f"one of {', '.join(models)}")
    p.add_argument("--batch-size", type=int, default=32, help="images per rank per step")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    p.add_argument(
        "--min-time",
        type=float,
        default=0.0,
        help="time at least this many seconds: more than --steps steps when needed, judged "
        "from the warm-up's pace (0: off)",
    )
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
    p.add_argument(
        "--data",
        choices=("synthetic", "real"),
        default="synthetic",
        help="synthetic: one random batch in memory; real: JPEG files in --data-dir read "
        "through the framework's input pipeline (I/O overhead = the difference)",
    )
    p.add_argument(
        "--data-dir",
        help="JPEG folder for --data real (CLASS/NNNNN.jpg); made by rank 0 when empty",
    )
    p.add_argument(
        "--dataset-images", type=int, default=512, help="images to generate for --data real"
    )
    p.add_argument(
        "--task",
        choices=("throughput", "accuracy"),
        default="throughput",
        help="accuracy: train on a learnable synthetic problem and log loss and accuracy",
    )
    p.add_argument("--logdir", help="write TensorBoard event files here (rank 0)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--data-format", choices=("nchw", "nhwc"), default=None)


def step_indices(a: argparse.Namespace, durations: list, agree=None):
    """Step numbers for a training loop: a.warmup untimed, then the timed ones: at least
    a.steps, and with --min-time as many more as the timed steps' own pace says are needed
    to last that long. Every rank asks agree(n) at the same step and takes rank 0's answer
    (collectives need the same count everywhere). The loop appends every step's duration
    to `durations` before asking for the next step."""
    total = a.warmup + a.steps
    i = 0
    while i < total:
        yield i
        if i == total - 1 and a.min_time > 0:
            timed = durations[a.warmup :]
            short = a.min_time - sum(timed)
            extra = 0 if short <= 0 else math.ceil(short / sorted(timed)[len(timed) // 2])
            extra = agree(extra) if agree else extra
            a.steps += extra
            total += extra
        i += 1


def check_args(p: argparse.ArgumentParser, a: argparse.Namespace, models: dict[str, int]) -> None:
    if a.model not in models:
        p.error(f"unknown model '{a.model}'; choose one of {', '.join(models)}")
    for name in ("batch_size", "steps", "dataset_images"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1 (got {getattr(a, name)})")
    if a.warmup < 0:
        p.error(f"--warmup must be 0 or more (got {a.warmup})")
    if not 0 <= a.min_time < 1e6:
        p.error(f"--min-time must be 0 or more seconds (got {a.min_time})")
    if a.data == "real" and not a.data_dir:
        p.error("--data real needs --data-dir DIR (a JPEG folder, generated when empty)")
    if a.data == "real" and a.task == "accuracy":
        p.error("--task accuracy trains on its own synthetic problem; drop --data real")


def unsupported(p: argparse.ArgumentParser, what: str, why: str) -> None:
    p.error(f"{what} is not supported here: {why}")


def is_oom(exc: BaseException) -> bool:
    """Whether an exception means the configuration did not fit in memory."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "ResourceExhaustedError":
        return True
    text = str(exc).lower()
    return any(s in text for s in ("out of memory", "can't allocate memory", "bad_alloc"))


def header(
    bench: str, status: str, framework: str, version: str, mpi: str, hosts: list[str], ranks: int
) -> dict:
    """The COMMON fields every record starts with (start-up comes with the figures), on
    rank 0 while its connections to the others are open (transport reads them)."""
    return {
        "schema": SCHEMA,
        "bench": bench,
        "status": status,
        "framework": framework,
        "framework_version": version,
        "mpi_library": mpi,
        "python": platform.python_version(),
        "image": os.environ.get("KIT_IMAGE", "native"),
        "hosts": hosts,
        "ranks": ranks,
        "transport": transport(hosts, ranks),
    }


def _tcp_connections() -> list[tuple[str, str]]:
    """This process's established TCP connections, (local address, remote address), read
    from /proc: what the kernel says carries its bytes, whatever library opened them."""
    mine = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/self/fd/{fd}")
                if link.startswith("socket:["):
                    mine.add(link[8:-1])
    found = []
    for table, size in (("/proc/self/net/tcp", 4), ("/proc/self/net/tcp6", 16)):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "01" and cols[9] in mine:  # 01: ESTABLISHED
                    found.append((_ip(cols[1], size), _ip(cols[2], size)))
    return found


def _ip(field: str, size: int) -> str:
    """/proc/net/tcp's hex address (host byte order in 32-bit words) as text."""
    raw = bytes.fromhex(field.split(":")[0])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, size, 4))
    return socket.inet_ntop(socket.AF_INET if size == 4 else socket.AF_INET6, words)


def _interfaces() -> dict[str, str]:
    """IPv4 address -> interface name, for this network namespace."""
    import fcntl
    import struct

    out = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            with contextlib.suppress(OSError):
                req = struct.pack("256s", name.encode()[:15])
                addr = fcntl.ioctl(s.fileno(), 0x8915, req)[20:24]  # SIOCGIFADDR
                out[socket.inet_ntoa(addr)] = name
    return out


def transport(hosts: list[str], ranks: int) -> str:
    """How rank 0 reached the other ranks, as the kernel shows it (see kitschema)."""
    if ranks == 1:
        return "none"
    if len(hosts) == 1:
        return "one host"
    local = _interfaces()
    via = sorted(
        {
            local.get(here.removeprefix("::ffff:"), "?")
            for here, there in _tcp_connections()
            if there.removeprefix("::ffff:") not in local and not there.startswith("127.")
        }
    )
    return f"tcp over {', '.join(via)}" if via else "not tcp"


def weights_in_sync(sums: list[float]) -> bool:
    """Whether every rank ended with the same weights (sums of |w| agree to 1e-6): proof
    that the gradients were combined."""
    return max(sums) - min(sums) <= 1e-6 * sums[0]


def oom_exit(
    bench: str, framework: str, version: str, mpi: str, a, rank: int, size: int, threads: int, exc
):
    """Report a configuration that did not fit as a result (status oom), then exit."""
    rec = {
        **header(bench, "oom", framework, version, mpi, [socket.gethostname()], size),
        "transport": "unknown",  # the rank that ran out of memory, maybe not rank 0
        "startup_s": 0.0,
        **train_settings(a),
        "threads_per_rank": threads,
        "images_per_sec": None,
        "images_per_sec_per_rank": [],
        "peak_rss_mb": [peak_rss_mb()],
        "step_times_s": [],
        "loss": [],
        "oom_rank": rank,
        "error": " ".join(str(exc).split())[:300],
        "fingerprint": fingerprint.take(),
    }
    print(json.dumps(rec), flush=True)
    mllog_lines.write(rec)  # KIT_MLLOG: the run, aborted
    print(
        f"{bench} {a.model} bs={a.batch_size}: out of memory on rank {rank}",
        file=sys.stderr,
        flush=True,
    )
    sys.stderr.flush()
    os._exit(OOM_EXIT)


def train_settings(a: argparse.Namespace) -> dict:
    return {
        "model": a.model,
        "batch_size": a.batch_size,
        "data": a.data,
        "task": a.task,
        "dist": a.dist,
        "precision": a.precision,
        "data_format": a.data_format,
        "warmup_steps": a.warmup,
        "steps": a.steps,
        "min_time_s": a.min_time,
    }


class Phases:
    """Where a launch's fixed cost goes, measured inside it: the benchmark marks each phase
    (kitschema.PHASES) as it ends, and this process's creation, read from /proc, tells the
    runtime's start (launcher, container, image mount) apart from the interpreter's. Made
    first thing in main(); a mark is a clock read and a dict update, nothing to sync."""

    def __init__(self, clock: Callable[[], float] = time.time, proc: str = "/proc") -> None:
        self._clock = clock
        self.start = self._last = clock()
        self.created = process_created(self.start, proc)
        self._marked: dict[str, float] = {}

    def mark(self, phase: str) -> None:
        """End `phase` now; a phase marked twice (MPI's group, then the framework's) adds up."""
        now = self._clock()
        self._marked[phase] = self._marked.get(phase, 0.0) + now - self._last
        self._last = now

    def seconds(self, launch: float | None) -> dict[str, float]:
        """Seconds per phase, from `launch` (--launch-time, the launcher's clock; None: from
        this process's creation), the first two left out where /proc had no answer."""
        first = {}
        if self.created is not None:
            if launch is not None:
                first["runtime_start"] = self.created - launch
            first["interpreter"] = self.start - self.created
        return {k: round(v, 4) for k, v in {**first, **self._marked}.items()}


def process_created(now: float, proc: str = "/proc") -> float | None:
    """When this process was created, on the wall clock: /proc/self/stat's starttime, clock
    ticks since boot, on a boot time of now less /proc/uptime (btime in /proc/stat is whole
    seconds). That is its fork: what a runtime does in it before exec (runc's namespaces
    and root) falls after. None where /proc cannot say, or says the impossible: an uptime
    virtualised (LXCFS) under the host's starttime puts the creation after now."""
    try:
        with open(f"{proc}/self/stat") as f:  # the name in (...) may hold spaces: cut after
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22
        with open(f"{proc}/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    created = now - uptime + ticks / os.sysconf("SC_CLK_TCK")
    return created if created <= now else None


def rank_figures(
    rank: int, batch_size: int, step_times: list[float], startup_s: float, phases: dict
) -> dict:
    return {
        "rank": rank,
        "host": socket.gethostname(),
        "timed_s": sum(step_times),
        "images_per_sec": batch_size * len(step_times) / sum(step_times),
        "peak_rss_mb": peak_rss_mb(),
        "startup_s": startup_s,
        "phases_s": phases,
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
    """The kit.bench/2 record from every rank's figures (rank_figures), gathered on rank 0."""
    size = len(ranks)
    slowest = max(r["timed_s"] for r in ranks)
    last_up = max(ranks, key=lambda r: r["startup_s"])  # its phases explain startup_s
    return {
        **header(bench, "ok", framework, version, mpi, sorted({r["host"] for r in ranks}), size),
        **train_settings(a),
        "threads_per_rank": threads,
        "images_per_sec": a.batch_size * size * a.steps / slowest,
        "images_per_sec_per_rank": [r["images_per_sec"] for r in ranks],
        "peak_rss_mb": [r["peak_rss_mb"] for r in ranks],
        "startup_s": last_up["startup_s"],
        "phases_s": last_up["phases_s"],
        "step_times_s": step_times,
        "loss": losses,
        "logdir": a.logdir,
        **extra,
    }


MEASURED_ISA = ("compile_isa",)  # record fields in which a benchmark measured its kernels' ISA


def emit(rec: dict) -> None:
    """Print the record with the launch's fingerprint (taken now: after the timed steps)."""
    known = {k: rec[k] for k in MEASURED_ISA if rec.get(k)}
    rec = {**rec, "fingerprint": fingerprint.take(known)}
    print(json.dumps(rec), flush=True)
    spec = BENCHES.get(rec["bench"])
    mllog_lines.write(rec, spec.metric if spec else None)  # KIT_MLLOG: MLPerf-style lines
    if spec and spec.sweep:  # each series' first value at its smallest and largest point
        summary = "; ".join(
            f"{x.field} {x.values[0].label} {_point(x, rows[0])} .. {_point(x, rows[-1])}"
            for x in spec.series
            if (rows := rec.get(x.field))
        )
    else:
        summary = (
            f"{rec['model']} bs={rec['batch_size']} {rec['data']} {rec['precision']}: "
            f"{rec['images_per_sec']:.1f} images/s"
        )
    print(
        f"{rec['bench']} ranks={rec['ranks']}: {summary}, start-up {rec['startup_s']:.2f} s",
        file=sys.stderr,
        flush=True,
    )


def _point(series, row: dict) -> str:
    value = series.values[0]
    return f"{row[value.key]:.1f} {value.unit} at {'/'.join(str(row[k]) for k in series.at)}"


def learnable_batch(rng, batch: int, side: int, channels_last: bool = False):
    """A batch of a problem any of the models can learn: each class has its own colour
    (fixed: seed 0, the same on every rank) under per-pixel noise drawn from rng;
    returns (x, y) as numpy arrays."""
    import numpy as np

    colours = 0.5 * np.random.default_rng(0).standard_normal((CLASSES, 3, 1, 1))
    y = rng.integers(0, CLASSES, batch)
    x = (colours[y] + rng.standard_normal((batch, 3, side, side))).astype(np.float32)
    return (x.transpose(0, 2, 3, 1).copy() if channels_last else x), y.astype(np.int64)


def ensure_dataset(path: str, images: int, side: int, rank: int, barrier) -> str:
    """A JPEG folder of `images` random side x side images in CLASSES class folders,
    made by rank 0 (with PIL) unless an identical one is there; returns its folder."""
    root = os.path.join(path, f"jpeg-{side}px-{images}")
    want = {"images": images, "side": side, "classes": CLASSES, "seed": 0}
    stamp = os.path.join(root, DATASET_STAMP)
    if rank == 0 and not _stamped(stamp, want):
        import numpy as np
        from PIL import Image

        rng = np.random.default_rng(0)
        for i in range(images):
            folder = os.path.join(root, f"class{i % CLASSES:02d}")
            os.makedirs(folder, exist_ok=True)
            pixels = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(os.path.join(folder, f"{i:06d}.jpg"), quality=90)
        with open(stamp, "w") as f:
            json.dump(want, f)
    barrier()
    return root


def _stamped(stamp: str, want: dict) -> bool:
    try:
        with open(stamp) as f:
            return json.load(f) == want
    except (OSError, ValueError):
        return False
