#!/usr/bin/env python3
"""The leanest idiomatic training loop of each framework: a yardstick, not a benchmark.

`kit run` does not offer it. ci/lean-parity runs it beside an entry
point in the same image (same model, batch, threads, one rank) to show that the
entry point adds nothing measurable to the step it times: here the same model
and optimizer run in a bare loop with one clock around all timed steps, no data
iterator, no per-step bookkeeping. Prints {"images_per_sec": ...} on stdout.
"""

from __future__ import annotations  # Python 3.9 in the Caffe2 images

import argparse
import json
import time

import kitbench

FRAMEWORKS = ("torch", "torch-hvd", "tf", "caffe2")


def timed(step, warmup: int, steps: int) -> float:
    """Seconds for `steps` calls of step() after `warmup` untimed ones."""
    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return time.perf_counter() - t0


def torch_loop(a: argparse.Namespace, horovod: bool):
    import torch
    import torch_cnn

    torch.set_num_threads(kitbench.threads_per_rank(0, 1))
    model = torch_cnn.build_model(a.model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if horovod:
        import horovod.torch as hvd

        hvd.init()
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    loss_fn = torch.nn.CrossEntropyLoss()
    side = kitbench.MODELS[a.model]
    x = torch.randn(a.batch_size, 3, side, side)
    y = torch.randint(0, kitbench.CLASSES, (a.batch_size,))

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def tf_loop(a: argparse.Namespace):
    import horovod.tensorflow as hvd_tf
    import tensorflow as tf
    import tf_cnn

    hvd_tf.init()
    threads = kitbench.threads_per_rank(0, 1)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    side = kitbench.MODELS[a.model]
    model = tf_cnn.build_model(tf, a.model, side)
    train = tf_cnn.compiled_step(tf, hvd_tf, model)
    x = tf.random.normal((a.batch_size, side, side, 3))
    y = tf.random.uniform((a.batch_size,), 0, kitbench.CLASSES, tf.int64)
    return lambda: train(x, y)[0].numpy()


def caffe2_loop(a: argparse.Namespace):
    import caffe2_cnn
    import torch
    from caffe2.python import brew, model_helper, optimizer, workspace

    torch.set_num_threads(kitbench.threads_per_rank(0, 1))
    workspace.GlobalInit(["caffe2", "--caffe2_log_level=2"])
    side = kitbench.MODELS[a.model]
    model = model_helper.ModelHelper(name="lean", arg_scope={"order": "NCHW"})
    init = model.param_init_net
    init.GaussianFill([], "data", shape=[a.batch_size, 3, side, side], mean=0.0, std=1.0)
    init.UniformIntFill([], "label", shape=[a.batch_size], min=0, max=kitbench.CLASSES - 1)
    logits = caffe2_cnn.NETS[a.model](brew, model, "data")
    _, loss = model.SoftmaxWithLoss([logits, "label"], ["sm", "loss"])
    model.AddGradientOperators([loss])
    optimizer.build_sgd(model, base_learning_rate=0.01, policy="fixed", momentum=0.9)
    workspace.RunNetOnce(model.param_init_net)
    workspace.CreateNet(model.net)
    name = model.net.Proto().name
    return lambda: workspace.RunNet(name)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", choices=FRAMEWORKS, required=True)
    p.add_argument("--model", default="tiny", choices=list(kitbench.MODELS))
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    if a.framework == "tf":
        step = tf_loop(a)
    elif a.framework == "caffe2":
        step = caffe2_loop(a)
    else:
        step = torch_loop(a, a.framework == "torch-hvd")
    seconds = timed(step, a.warmup, a.steps)
    print(json.dumps({"images_per_sec": a.batch_size * a.steps / seconds}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
