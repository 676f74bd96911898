#!/usr/bin/env python3
"""MPI allgather over message sizes with mpi4py: what a data-parallel job pays to gather
every rank's shard (ZeRO-style parameter gathers, sharded checkpoints).

Each rank contributes `bytes` of float32 and receives every rank's: the time is the
slowest rank's mean, and the algorithm bandwidth is the bytes each rank receives
over that time. Sizes and timing as mpi_bench.py's. Rank 0 prints one kit.bench/2
record; its rows are declared in kitschema (ALLGATHER), which is all the runner needs
to table and draw them.
"""

from __future__ import annotations  # Python 3.9 in the Caffe2 images

import array
import socket
import sys
import time

import kitbench
import mpi_bench


def allgather(comm, nbytes: int, budget: float) -> dict:
    from mpi4py import MPI

    size = comm.Get_size()
    send = array.array("f", bytes(nbytes))
    recv = array.array("f", bytes(nbytes * size))

    def once() -> None:
        comm.Allgather([send, MPI.FLOAT], [recv, MPI.FLOAT])

    n, slowest = mpi_bench.collective(comm, once, budget)
    return {
        "bytes": nbytes,
        "iterations": n,
        "latency_us": slowest * 1e6,
        "bandwidth_mb_s": nbytes * size / slowest / 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    a, launch, mpi, comm = mpi_bench.started("allgather_bench", argv)
    import mpi4py

    sizes = mpi_bench.sizes(a)
    first = allgather(comm, sizes[0], a.time_per_size)
    startup = time.time() - launch
    rows = [first] + [allgather(comm, n, a.time_per_size) for n in sizes[1:]]
    hosts = sorted(set(comm.gather(socket.gethostname(), root=0) or []))
    startups = comm.gather(startup, root=0)
    if comm.Get_rank() == 0:
        kitbench.emit(
            {
                **kitbench.header(
                    "allgather", "ok", "mpi4py", mpi4py.__version__, mpi, hosts, comm.Get_size()
                ),
                "startup_s": max(startups),
                "allgather": rows,
            }
        )
    kitbench.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
