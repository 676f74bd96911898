#!/usr/bin/env python3
"""MPI micro-benchmarks with mpi4py: ping-pong latency/bandwidth and allreduce over message sizes.

What NetPIPE and the OSU benchmarks show, from Python, so a container's effect
on the interconnect path (shared memory, network, the MPI library it carries)
is measured with the same library the training benchmarks use. Ping-pong runs
between ranks 0 and 1 (latency is half the round trip; bandwidth is bytes over
that one-way time); allreduce sums float32 vectors over all ranks and reports
the slowest rank's mean time. With one rank only allreduce runs. Rank 0 prints
one kit.bench/2 record. Depends only on mpi4py (buffers are standard-library arrays).
"""

from __future__ import annotations  # Python 3.9 in the Caffe2 images

import argparse
import array
import socket
import sys
import time

import kitbench


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min-bytes", type=int, default=4, help="smallest message (bytes)")
    p.add_argument("--max-bytes", type=int, default=4 << 20, help="largest message (bytes)")
    p.add_argument(
        "--factor", type=int, default=4, help="size step: each size is factor x the last"
    )
    p.add_argument(
        "--time-per-size", type=float, default=0.2, help="seconds of timed repetitions per size"
    )
    p.add_argument("--launch-time", type=float, default=None, help="epoch seconds at launch")
    a = p.parse_args(argv)
    if a.min_bytes < 4 or a.min_bytes % 4:
        p.error(f"--min-bytes must be a multiple of 4, at least 4 (got {a.min_bytes})")
    if a.max_bytes < a.min_bytes:
        p.error(f"--max-bytes ({a.max_bytes}) must be at least --min-bytes ({a.min_bytes})")
    if a.factor < 2:
        p.error(f"--factor must be at least 2 (got {a.factor})")
    if a.time_per_size <= 0:
        p.error(f"--time-per-size must be positive (got {a.time_per_size})")
    return a


def sizes(a: argparse.Namespace) -> list[int]:
    out, n = [], a.min_bytes
    while n <= a.max_bytes:
        out.append(n)
        n *= a.factor
    return out


def iterations(comm, once, budget: float) -> int:
    """Repetitions filling about `budget` seconds, agreed by all ranks (rank 0's estimate)."""
    for _ in range(3):  # warm-up: connections, registration, page faults
        once()
    comm.Barrier()
    t0 = time.perf_counter()
    once()
    guess = max(5, min(100000, int(budget / max(time.perf_counter() - t0, 1e-7))))
    return comm.bcast(guess, root=0)


def pingpong(comm, nbytes: int, budget: float) -> dict | None:
    """Half the mean round trip between ranks 0 and 1 (others idle at the barrier)."""
    from mpi4py import MPI

    rank = comm.Get_rank()
    buf = bytearray(nbytes)
    peer = 1 - rank

    def once() -> None:
        if rank == 0:
            comm.Send([buf, MPI.BYTE], dest=1, tag=7)
            comm.Recv([buf, MPI.BYTE], source=1, tag=7)
        elif rank == 1:
            comm.Recv([buf, MPI.BYTE], source=peer, tag=7)
            comm.Send([buf, MPI.BYTE], dest=peer, tag=7)

    n = iterations(comm, once, budget)
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        once()
    one_way = (time.perf_counter() - t0) / n / 2
    comm.Barrier()
    return {
        "bytes": nbytes,
        "iterations": n,
        "latency_us": one_way * 1e6,
        "bandwidth_mb_s": nbytes / one_way / 1e6,
    }


def collective(comm, once, budget: float) -> tuple[int, float]:
    """Repetitions of a collective filling about `budget` seconds, and the slowest rank's
    mean seconds for one."""
    from mpi4py import MPI

    n = iterations(comm, once, budget)
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        once()
    return n, comm.allreduce((time.perf_counter() - t0) / n, MPI.MAX)


def allreduce(comm, nbytes: int, budget: float) -> dict:
    from mpi4py import MPI

    send = array.array("f", bytes(nbytes))
    recv = array.array("f", bytes(nbytes))

    def once() -> None:
        comm.Allreduce([send, MPI.FLOAT], [recv, MPI.FLOAT], op=MPI.SUM)

    n, slowest = collective(comm, once, budget)
    return {"bytes": nbytes, "iterations": n, "latency_us": slowest * 1e6}


def started(script: str, argv: list[str] | None) -> tuple[argparse.Namespace, float, str, object]:
    """The options, the launch time, the MPI library loaded and COMM_WORLD; exits 2
    without mpi4py."""
    t_start = time.time()
    a = parse_args(argv)
    mpi = kitbench.mpi_library()
    if mpi == "none":
        print(f"{script}: needs mpi4py (in every kit image)", file=sys.stderr)
        raise SystemExit(2)
    return a, a.launch_time or t_start, mpi, kitbench.mpi_comm()


def main(argv: list[str] | None = None) -> int:
    a, launch, mpi, comm = started("mpi_bench", argv)
    import mpi4py

    rank, size = comm.Get_rank(), comm.Get_size()
    budget = a.time_per_size
    first = allreduce(comm, a.min_bytes, budget)
    startup = time.time() - launch
    reduce = [first] + [allreduce(comm, n, budget) for n in sizes(a)[1:]]
    p2p = [pingpong(comm, n, budget) for n in sizes(a)] if size > 1 else []
    hosts = sorted(set(comm.gather(socket.gethostname(), root=0) or []))
    startups = comm.gather(startup, root=0)
    if rank == 0:
        kitbench.emit(
            {
                **kitbench.header("mpi", "ok", "mpi4py", mpi4py.__version__, mpi, hosts, size),
                "startup_s": max(startups),
                "p2p": p2p,
                "allreduce": reduce,
            }
        )
    kitbench.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
