#!/usr/bin/env python3
"""Caffe2 synthetic-data CNN training benchmark (brew nets, Gloo allreduce, TensorBoard events).

Caffe2 as shipped in PyTorch 1.10.2's wheel: the net is built with model_helper
and brew and parallelised with data_parallel_model. No Caffe2 wheel has MPI, so
with several ranks the gradients are allreduced by Gloo, whose ranks meet through
a file store in a directory every rank can see (--store, default /dev/shm: one
node); mpirun (or srun) only starts the ranks, and mpi4py agrees the store's name.
With --logdir, rank 0 writes TensorBoard event files (tensorboardX): the graph,
and per step loss, accuracy and images/s, as c2board did.
"""

from __future__ import annotations  # Python 3.9 in the Caffe2 images

import argparse
import os
import sys
import time
import uuid

import kitbench

CLASSES = kitbench.CLASSES


def tiny(brew, model, data: str) -> str:
    conv1 = brew.conv(model, data, "conv1", dim_in=3, dim_out=16, kernel=3, pad=1)
    pool1 = brew.max_pool(model, brew.relu(model, conv1, conv1), "pool1", kernel=2, stride=2)
    conv2 = brew.conv(model, pool1, "conv2", dim_in=16, dim_out=32, kernel=3, pad=1)
    pool2 = brew.average_pool(model, brew.relu(model, conv2, conv2), "pool2", global_pooling=True)
    return brew.fc(model, pool2, "fc", dim_in=32, dim_out=CLASSES)


def alexnet(brew, model, data: str) -> str:
    """The single-tower AlexNet (as torchvision's), from brew layers."""
    blob, dim = data, 3
    for i, (out, kernel, stride, pad, pool) in enumerate(
        [
            (64, 11, 4, 2, True),
            (192, 5, 1, 2, True),
            (384, 3, 1, 1, False),
            (256, 3, 1, 1, False),
            (256, 3, 1, 1, True),
        ]
    ):
        conv = brew.conv(
            model, blob, f"conv{i}", dim_in=dim, dim_out=out, kernel=kernel, stride=stride, pad=pad
        )
        blob, dim = brew.relu(model, conv, conv), out
        if pool:
            blob = brew.max_pool(model, blob, f"pool{i}", kernel=3, stride=2)
    fc, dim = blob, 256 * 6 * 6
    for i, out in enumerate([4096, 4096]):
        fc = brew.relu(model, brew.fc(model, fc, f"fc{i}", dim_in=dim, dim_out=out), f"fc{i}")
        dim = out
    return brew.fc(model, fc, "fc_out", dim_in=dim, dim_out=CLASSES)


def resnet(layers: int):
    """Caffe2's own ResNet builder (caffe2.python.models.resnet): ResNeXt with one group
    of width 64 is ResNet-50/101/152."""

    def build(brew, model, data: str) -> str:
        from caffe2.python.models import resnet as r

        return r.create_resnext(
            model,
            data,
            num_input_channels=3,
            num_labels=CLASSES,
            num_layers=layers,
            num_groups=1,
            num_width_per_group=64,
            no_loss=True,
        )

    return build


NETS = {
    "tiny": tiny,
    "alexnet": alexnet,
    "resnet50": resnet(50),
    "resnet101": resnet(101),
    "resnet152": resnet(152),
}
MODELS = {name: kitbench.MODELS[name] for name in NETS}  # no inception3 here


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    kitbench.common_args(p, MODELS)
    p.add_argument("--store", default="/dev/shm", help="Gloo rendezvous folder all ranks see")
    a = p.parse_args(argv)
    kitbench.check_args(p, a, MODELS)
    why = "the Caffe2 in PyTorch's wheel"
    if a.data == "real":
        kitbench.unsupported(p, "--data real", f"{why} has no ImageInput (built without OpenCV)")
    if a.precision != "fp32":
        kitbench.unsupported(p, f"--precision {a.precision}", f"{why} trains in fp32 on a CPU")
    if a.data_format == "nhwc":
        kitbench.unsupported(p, "--data-format nhwc", f"{why}'s CPU nets here are NCHW")
    a.data_format, a.dist = "nchw", "gloo"
    return a


def rendezvous(a: argparse.Namespace, rank: int, size: int) -> dict | None:
    """Gloo over TCP, ranks meeting in a fresh file store; loopback when on one host."""
    if size == 1:
        return None
    from caffe2.python import core, workspace

    comm = kitbench.mpi_comm()
    path = comm.bcast(os.path.join(a.store, f"kit-caffe2-{uuid.uuid4().hex}"), root=0)
    hosts = set(comm.allgather(os.uname().nodename))
    if rank == 0:
        os.makedirs(path)
    comm.Barrier()
    workspace.RunOperatorOnce(
        core.CreateOperator("FileStoreHandlerCreate", [], ["store_handler"], path=path)
    )
    return {
        "kv_handler": "store_handler",
        "shard_id": rank,
        "num_shards": size,
        "engine": "GLOO",
        "transport": "tcp",
        "interface": "lo" if len(hosts) == 1 else "",
        "exit_nets": None,
        "path": path,
    }


def main(argv: list[str] | None = None) -> int:
    phases = kitbench.Phases()
    a = parse_args(argv)
    launch = a.launch_time or phases.start
    rank, size = kitbench.launcher_rank()
    mpi = kitbench.mpi_library()
    threads = kitbench.threads_per_rank(a.threads, size)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import numpy as np
    import torch
    from caffe2.python import brew, data_parallel_model, model_helper, optimizer, workspace

    phases.mark("imports")
    torch.set_num_threads(threads)
    workspace.GlobalInit(["caffe2", "--caffe2_log_level=2"])
    side = MODELS[a.model]

    def inputs(model) -> None:
        init = model.param_init_net
        init.GaussianFill([], "data", shape=[a.batch_size, 3, side, side], mean=0.0, std=1.0)
        init.UniformIntFill([], "label", shape=[a.batch_size], min=0, max=CLASSES - 1)

    def forward(model, loss_scale: float) -> list:
        logits = NETS[a.model](brew, model, "data")
        softmax, loss = model.SoftmaxWithLoss([logits, "label"], ["sm", "loss"])
        brew.accuracy(model, [softmax, "label"], "accuracy")
        return [model.Scale(loss, "scaled_loss", scale=loss_scale)]

    def sgd(model) -> None:
        optimizer.build_sgd(model, base_learning_rate=0.01, policy="fixed", momentum=0.9)

    model = model_helper.ModelHelper(name=f"kit_{a.model}", arg_scope={"order": "NCHW"})
    meet = rendezvous(a, rank, size)
    phases.mark("process_group")
    data_parallel_model.Parallelize(
        model,
        input_builder_fun=inputs,
        forward_pass_builder_fun=forward,
        optimizer_builder_fun=sgd,
        devices=[0],
        rendezvous=meet and {k: v for k, v in meet.items() if k != "path"},
        cpu_device=True,
        optimize_gradient_memory=False,
        # The plain executor, on the thread torch.set_num_threads configured: Parallelize's
        # default DAG runs ops on worker threads whose OpenMP teams are one thread wide
        # (measured: one core busy, 1.1 vs 1.9 images/s at ResNet-50 batch 8 on 2 cores).
        # Gloo's allreduce ops then run in order with the others, on every rank alike.
        net_type="simple",
    )
    workspace.RunNetOnce(model.param_init_net)
    params = sorted(str(p) for p in model.GetParams())
    if size > 1:  # every rank starts from rank 0's weights (Caffe2 does not broadcast them)
        comm = kitbench.mpi_comm()
        for name in params:
            workspace.FeedBlob(name, comm.bcast(workspace.FetchBlob(name), root=0))
    workspace.CreateNet(model.net)
    writer = None
    if a.logdir and rank == 0:
        from tensorboardX import SummaryWriter

        writer = SummaryWriter(a.logdir)
        writer.add_graph_deprecated([model.param_init_net, model.net])
    prefix = "cpu_0/"
    rng = np.random.default_rng(1234 + rank)
    phases.mark("model_build")
    step_times, losses, accuracies, first_step_end = [], [], [], None
    try:
        durations: list[float] = []
        agree = (lambda n: kitbench.mpi_comm().bcast(n, root=0)) if size > 1 else None
        for i in kitbench.step_indices(a, durations, agree):
            if i == a.warmup:
                phases.mark("warmup")
            t0 = time.perf_counter()
            if a.task == "accuracy":
                x, y = kitbench.learnable_batch(rng, a.batch_size, side)
                workspace.FeedBlob(prefix + "data", x)
                workspace.FeedBlob(prefix + "label", y.astype(np.int32))
            workspace.RunNet(model.net.Proto().name)
            dt = time.perf_counter() - t0
            durations.append(dt)
            if first_step_end is None:
                first_step_end = time.time()
            loss = float(workspace.FetchBlob(prefix + "loss"))
            accuracy = float(workspace.FetchBlob(prefix + "accuracy"))
            if writer:
                writer.add_scalar("loss", loss, i)
                writer.add_scalar("accuracy", accuracy, i)
                writer.add_scalar("images_per_sec", a.batch_size * size / dt, i)
            if i >= a.warmup:
                step_times.append(dt)
                losses.append(loss)
                accuracies.append(accuracy)
    except Exception as exc:
        if not kitbench.is_oom(exc):
            raise
        kitbench.oom_exit(
            "caffe2-cnn", "caffe2", torch.__version__, mpi, a, rank, size, threads, exc
        )
    phases.mark("timed")
    if writer:
        writer.close()
    mine = kitbench.rank_figures(
        rank, a.batch_size, step_times, first_step_end - launch, phases.seconds(a.launch_time)
    )
    mine["weights_sum"] = float(sum(abs(workspace.FetchBlob(n)).sum() for n in params))
    ranks = [mine]
    if size > 1:
        ranks = kitbench.mpi_comm().gather(mine, root=0)
        if rank == 0:
            for name in os.listdir(meet["path"]):
                os.remove(os.path.join(meet["path"], name))
            os.rmdir(meet["path"])
    if rank == 0:
        kitbench.emit(
            kitbench.record(
                "caffe2-cnn",
                "caffe2",
                torch.__version__,
                mpi,
                a,
                ranks,
                threads,
                step_times,
                losses,
                accuracy=accuracies,
                weights_in_sync=kitbench.weights_in_sync([r["weights_sum"] for r in ranks]),
            )
        )
    if size > 1:
        kitbench.finalize()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # As in torch_cnn: everything is written; skip teardown of the Gloo contexts.
    os._exit(code)
