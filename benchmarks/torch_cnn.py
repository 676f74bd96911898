#!/usr/bin/env python3
"""PyTorch synthetic-data CNN training benchmark (DDP over Gloo under any MPI launcher).

Runs the same way natively and inside every image. Rank and size come from the
launcher's environment (MPICH/Hydra, Open MPI or Slurm); with several ranks the
Gloo rendezvous address is agreed through MPI (mpi4py), so no extra port or
shared file is needed. Rank 0 prints one JSON record (schema kit.bench/1) on
stdout and a one-line summary on stderr. Depends on torch (and mpi4py for >1 rank).
"""

from __future__ import annotations  # Python 3.9 in the Caffe2 images

import argparse
import os
import socket
import sys
import time

import kitbench


def rendezvous(rank: int) -> tuple[str, int]:
    """Rank 0's address and a free port, shared with every rank through MPI."""
    comm = kitbench.mpi_comm()
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
    kitbench.common_args(p, list(MODELS))
    a = p.parse_args(argv)
    kitbench.check_args(p, a, list(MODELS))
    return a


def main(argv: list[str] | None = None) -> int:
    t_start = time.time()
    a = parse_args(argv)
    launch = a.launch_time or t_start
    rank, size = kitbench.launcher_rank()
    mpi = kitbench.mpi_library()
    import torch
    import torch.distributed as dist

    threads = kitbench.threads_per_rank(a.threads, size)
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
    ranks = [kitbench.rank_figures(rank, a.batch_size, step_times, first_step_end - launch)]
    if size > 1:
        ranks = kitbench.mpi_comm().gather(ranks[0], root=0)
        # No destroy_process_group(): in torch 1.13 the Gloo group's destructor can
        # deadlock (it waits for the group's mutex holding the GIL, while a worker
        # holding the mutex waits for the GIL to free a tensor). The process leaves
        # through os._exit below, so nothing is torn down.
        kitbench.finalize()
    if rank == 0:
        kitbench.emit(
            kitbench.record(
                "torch-cnn", "torch", torch.__version__, mpi, a, ranks, threads, step_times, losses
            )
        )
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Interpreter teardown would run the Gloo group's destructor, which can deadlock
    # (see main); everything is measured and written by now, so leave without it.
    os._exit(code)
