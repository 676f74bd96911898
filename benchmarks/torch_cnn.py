#!/usr/bin/env python3
"""PyTorch CNN training benchmark: DDP over Gloo or Horovod, under any MPI launcher.

Runs the same way natively and inside every image. Rank and size come from the
launcher's environment (MPICH/Hydra, Open MPI, Slurm or torchrun); with DDP the Gloo
rendezvous address is agreed through MPI (mpi4py), so no extra port or shared
file is needed (under torchrun, torchrun gives it); with --dist horovod, Horovod (MPI
controller) averages the gradients and broadcasts rank 0's initial state. Models come
from torchvision, or are built here with its layers where it is absent (PyTorch 2.x
images).
Rank 0 prints one JSON record (schema kit.bench/2) on stdout and a one-line
summary on stderr. Depends on torch (torchvision for Inception-v3 and --data real,
mpi4py for DDP over >1 rank, tensorboardX or TensorBoard for --logdir, PIL to generate
--data real).
"""

from __future__ import annotations  # Python 3.9 in the Caffe2 images

import argparse
import contextlib
import os
import shutil
import socket
import sys
import tempfile
import time

import kitbench

MODELS = kitbench.MODELS  # all of them, with their input sizes


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


def has_torchvision() -> bool:
    try:
        import torchvision  # noqa: F401
    except ImportError:
        return False
    return True


def vector_isa() -> str:
    """The CPU vector instructions torch.compile's C++ kernels were built for, as inductor
    found them: "INVALID_VEC_ISA" (scalar kernels, about half the speed here) where its
    probe library did not load, e.g. on a host whose Debian libtorch-dev shadows the
    wheel's libtorch_cpu on the link path."""
    try:
        from torch._inductor.cpu_vec_isa import pick_vec_isa
    except ImportError:  # PyTorch before 2.4
        from torch._inductor.codecache import pick_vec_isa
    return str(pick_vec_isa()) or "INVALID_VEC_ISA"


def build_model(name: str):
    """torchvision's model where torchvision is installed, else the same architecture
    built here (the pytorch2 images have no CPU torchvision; see their recipe)."""
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
            nn.Linear(32, kitbench.CLASSES),
        )
    if not has_torchvision():
        return own_model(name)
    from torchvision import models

    if name == "inception3":
        return models.inception_v3(
            num_classes=kitbench.CLASSES, aux_logits=False, init_weights=True
        )
    return getattr(models, name)(num_classes=kitbench.CLASSES)


RESNET_BLOCKS = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3), "resnet152": (3, 8, 36, 3)}
OWN_MODELS = ("tiny", "alexnet", *RESNET_BLOCKS)  # what runs without torchvision


def own_model(name: str):
    """AlexNet and the bottleneck ResNets with torchvision's layers and shapes (ResNet
    v1.5: the stride on the 3x3 convolution), so an image/s means the same work."""
    import torch.nn as nn

    classes = kitbench.CLASSES
    if name == "alexnet":
        return nn.Sequential(
            nn.Conv2d(3, 64, 11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.AdaptiveAvgPool2d((6, 6)), nn.Flatten(),
            nn.Dropout(), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, classes),
        )  # fmt: skip

    def conv_bn(cin: int, cout: int, k: int, stride: int = 1, relu: bool = True) -> list:
        layers = [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]
        return [*layers, nn.ReLU(inplace=True)] if relu else layers

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            out = width * 4
            self.body = nn.Sequential(
                *conv_bn(cin, width, 1), *conv_bn(width, width, 3, stride),
                *conv_bn(width, out, 1, relu=False),
            )  # fmt: skip
            self.skip = (
                nn.Sequential(*conv_bn(cin, out, 1, stride, relu=False))
                if stride != 1 or cin != out
                else nn.Identity()
            )

        def forward(self, x):
            return (self.body(x) + self.skip(x)).relu_()

    layers, cin = [*conv_bn(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1)], 64
    for i, blocks in enumerate(RESNET_BLOCKS[name]):
        width = 64 * 2**i
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, 2 if b == 0 and i > 0 else 1))
            cin = width * 4
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    kitbench.common_args(p, MODELS)
    p.add_argument(
        "--dist",
        choices=("ddp", "horovod"),
        default="ddp",
        help="gradient averaging over ranks: DistributedDataParallel (Gloo) or Horovod",
    )
    p.add_argument("--loader-workers", type=int, default=1, help="DataLoader workers (--data real)")
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model (PyTorch 2): the first step, which compiles, is timed "
        "apart (compile_s) with an inductor cache of its own, so each trial compiles anew",
    )
    a = p.parse_args(argv)
    kitbench.check_args(p, a, MODELS)
    if a.compile and a.warmup < 1:
        p.error("--compile needs --warmup 1 or more: the first step compiles")
    if not has_torchvision() and (a.data == "real" or a.model not in OWN_MODELS):
        p.error(f"--model {a.model} --data {a.data} needs torchvision, which is not installed")
    a.data_format = a.data_format or "nchw"
    return a


class Dist:
    """Rank, size and the few collective operations the benchmark needs, for DDP or Horovod."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        if kind == "horovod":
            import horovod.torch as hvd

            kitbench.mpi_comm()  # MPI started (and finalised, in finish) by this thread
            hvd.init()
            self.hvd = hvd
            self.rank, self.size = hvd.rank(), hvd.size()
        else:
            self.rank, self.size = kitbench.launcher_rank()
        # under torchrun the Gloo group itself carries the benchmark's own collectives
        self.torchrun = kind == "ddp" and kitbench.under_torchrun()
        if self.torchrun:
            import torch.distributed

            self.group = torch.distributed

    def barrier(self) -> None:
        if self.size == 1:
            return
        if self.kind == "horovod":
            self.hvd.barrier()
        elif self.torchrun:
            self.group.barrier()
        else:
            kitbench.mpi_comm().Barrier()

    def gather(self, obj):
        if self.size == 1:
            return [obj]
        if self.kind == "horovod":
            return self.hvd.allgather_object(obj)
        if self.torchrun:
            out = [None] * self.size
            self.group.all_gather_object(out, obj)
            return out
        return kitbench.mpi_comm().gather(obj, root=0)

    def agree(self, n: int) -> int:
        """Rank 0's n on every rank (through Horovod in Horovod mode: one MPI user)."""
        if self.kind == "horovod":
            return self.hvd.broadcast_object(n, root_rank=0)
        if self.torchrun:
            box = [n]
            self.group.broadcast_object_list(box, src=0)
            return box[0]
        return kitbench.mpi_comm().bcast(n, root=0)

    def finish(self) -> None:
        if self.torchrun:
            return  # no MPI was started; the Gloo group is left to os._exit (see below)
        if self.size > 1 and self.kind == "ddp":
            # No destroy_process_group(): in torch 1.13 the Gloo group's destructor can
            # deadlock (it waits for the group's mutex holding the GIL, while a worker
            # holding the mutex waits for the GIL to free a tensor). The process leaves
            # through os._exit, so nothing is torn down.
            kitbench.finalize()
        elif self.kind == "horovod":
            self.hvd.join()  # every rank is done with collectives before any shuts down
            self.hvd.shutdown()
            kitbench.finalize()


def real_batches(a: argparse.Namespace, d: Dist, side: int):
    """Endless (x, y) batches decoded from the JPEG folder by torchvision's ImageFolder
    and a DataLoader, each rank reading its own shard."""
    import torch
    from torchvision import datasets, transforms

    root = kitbench.ensure_dataset(a.data_dir, a.dataset_images, side, d.rank, d.barrier)
    ds = datasets.ImageFolder(
        root,
        transforms.Compose(
            [
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
            ]
        ),
    )
    sampler = torch.utils.data.DistributedSampler(ds, d.size, d.rank, shuffle=True, seed=0)
    loader = torch.utils.data.DataLoader(
        ds,
        batch_size=a.batch_size,
        sampler=sampler,
        num_workers=a.loader_workers,
        drop_last=True,
        persistent_workers=a.loader_workers > 0,
    )
    if len(loader) == 0:
        raise SystemExit(
            f"torch_cnn: --dataset-images {a.dataset_images} gives no full batch of "
            f"{a.batch_size} per rank over {d.size} ranks; raise --dataset-images"
        )
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def batches(a: argparse.Namespace, d: Dist, side: int):
    """(x, y) per step: one fixed random batch, the learnable problem, or real files."""
    import numpy as np
    import torch

    if a.data == "real":
        yield from real_batches(a, d, side)
        return
    rng = np.random.default_rng(1234 + d.rank)
    if a.task == "accuracy":
        while True:
            x, y = kitbench.learnable_batch(rng, a.batch_size, side)
            yield torch.from_numpy(x), torch.from_numpy(y)
    x = torch.randn(a.batch_size, 3, side, side)
    y = torch.randint(0, kitbench.CLASSES, (a.batch_size,))
    while True:
        yield x, y


def device_for(torch):
    """This rank's GPU where CUDA sees one (one a rank, by its rank on the node: a cuda
    image trains on the GPU it was built for), else the CPU."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    index = kitbench.local_rank() % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def writer_for(logdir: str | None):
    if not logdir:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # no TensorBoard package: tensorboardX writes the same files
        from tensorboardX import SummaryWriter
    return SummaryWriter(logdir)


def main(argv: list[str] | None = None) -> int:
    phases = kitbench.Phases()
    a = parse_args(argv)
    launch = a.launch_time or phases.start
    mpi = kitbench.mpi_library()
    import torch
    import torch.distributed as dist

    phases.mark("imports")
    d = Dist(a.dist)
    threads = kitbench.threads_per_rank(a.threads, d.size)
    torch.set_num_threads(threads)
    torch.manual_seed(1234)  # the same initial weights on every rank
    dev = device_for(torch)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    if d.size > 1 and d.torchrun:
        dist.init_process_group(backend, init_method="env://")  # torchrun's rendezvous
    elif d.size > 1 and a.dist == "ddp":
        addr, port = rendezvous(d.rank)
        dist.init_process_group(
            backend, init_method=f"tcp://{addr}:{port}", rank=d.rank, world_size=d.size
        )
    phases.mark("process_group")
    fmt = torch.channels_last if a.data_format == "nhwc" else torch.contiguous_format
    model = build_model(a.model).to(dev, memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if d.size > 1 and a.dist == "ddp":
        ids = [dev.index] if dev.type == "cuda" else None
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
    elif a.dist == "horovod":
        opt = d.hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
        d.hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        d.hvd.broadcast_optimizer_state(opt, root_rank=0)
    inductor_cache = None
    if a.compile:
        inductor_cache = tempfile.mkdtemp(prefix="kit-inductor-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache  # no compile reused
        model = torch.compile(model)
    loss_fn = torch.nn.CrossEntropyLoss()
    precision = (
        torch.autocast(dev.type, dtype=torch.bfloat16)
        if a.precision == "bf16"
        else contextlib.nullcontext()
    )
    writer = writer_for(a.logdir) if d.rank == 0 else None
    data = batches(a, d, MODELS[a.model])
    phases.mark("model_build")
    step_times, losses, accuracies, first_step_end = [], [], [], None
    try:
        durations: list[float] = []
        for i in kitbench.step_indices(a, durations, d.agree if d.size > 1 else None):
            if i == a.warmup:
                phases.mark("warmup")
            t0 = time.perf_counter()
            x, y = next(data)
            x, y = x.to(dev).contiguous(memory_format=fmt), y.to(dev)
            opt.zero_grad()
            with precision:
                out = model(x)
                loss = loss_fn(out.float(), y)
            loss.backward()
            opt.step()
            if dev.type == "cuda":
                torch.cuda.synchronize()  # the step's kernels done, not only queued
            dt = time.perf_counter() - t0
            durations.append(dt)
            if first_step_end is None:
                first_step_end = time.time()
            accuracy = float((out.argmax(1) == y).float().mean())
            if writer:
                writer.add_scalar("loss", float(loss), i)
                writer.add_scalar("accuracy", accuracy, i)
                writer.add_scalar("images_per_sec", a.batch_size * d.size / dt, i)
            if i >= a.warmup:
                step_times.append(dt)
                losses.append(float(loss))
                accuracies.append(accuracy)
    except Exception as exc:
        if not kitbench.is_oom(exc):
            raise
        kitbench.oom_exit(
            "torch-cnn", "torch", torch.__version__, mpi, a, d.rank, d.size, threads, exc
        )
    phases.mark("timed")
    if writer:
        writer.close()
    if inductor_cache:
        shutil.rmtree(inductor_cache, ignore_errors=True)
    mine = kitbench.rank_figures(
        d.rank, a.batch_size, step_times, first_step_end - launch, phases.seconds(a.launch_time)
    )
    # each rank's sum of |w|: equal on every rank when the gradients were combined
    mine["weights_sum"] = float(sum(float(w.detach().abs().sum()) for w in model.parameters()))
    ranks = d.gather(mine)
    if d.rank == 0:
        kitbench.emit(
            kitbench.record(
                "torch-cnn",
                "torch",
                torch.__version__,
                mpi,
                a,
                ranks,
                threads,
                step_times,
                losses,
                accuracy=accuracies,
                compile=a.compile,
                compile_s=durations[0] if a.compile else None,
                compile_isa=vector_isa() if a.compile else None,
                device="gpu" if dev.type == "cuda" else "cpu",
                weights_in_sync=kitbench.weights_in_sync([r["weights_sum"] for r in ranks]),
            )
        )
    d.finish()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Interpreter teardown would run the Gloo group's destructor, which can deadlock
    # (see Dist.finish); everything is measured and written by now, so leave without it.
    os._exit(code)
