#!/usr/bin/env python3
"""TensorFlow 2 CNN training with MultiWorkerMirroredStrategy, under any MPI launcher.

tf.distribute's multi-worker path, what TensorFlow 2.x users run since Horovod's
last release: every rank is a worker with one replica; gradients are all-reduced
by TensorFlow's own collectives (ring over gRPC on CPUs, NCCL on GPUs). The
launcher only starts and numbers the ranks: each rank's host and a free port are
gathered over MPI (mpi4py) into TF_CONFIG, so the same command runs on one host or
across nodes. With GPUs, each rank takes one (by its rank on the node). Each step is
one tf.function around strategy.run. Same models, data modes and record (kit.bench/2)
as tf-cnn, Keras 3 included; rank 0 prints it.
Depends on tensorflow and mpi4py.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys

import kitbench
import tf_cnn

MODELS = kitbench.MODELS  # all of them, with their input sizes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return tf_cnn.parse_args(argv, __doc__.splitlines()[0], "multi_worker_mirrored")


def tf_config(comm, rank: int) -> str:
    """TF_CONFIG for this rank: every rank's host and a port free there, in rank order."""
    with socket.socket() as s:  # held until all have theirs: no two ranks get one port
        s.bind(("", 0))
        everyone = comm.allgather((socket.gethostname(), s.getsockname()[1]))
    one_host = len({host for host, _ in everyone}) == 1
    workers = [f"{'localhost' if one_host else h}:{port}" for h, port in everyone]
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}})


def compiled_step(tf, strategy, model, global_batch: int):
    """One training step as a tf.function: the loss and accuracy of rank's own batch."""
    with strategy.scope():  # its slots are mirrored variables, as the model's
        opt = tf.keras.optimizers.SGD(0.01, momentum=0.9)
        opt.build(model.trainable_variables)

    def replica(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            per_image = tf.keras.losses.sparse_categorical_crossentropy(y, logits, True)
            # summed over the replicas by the optimizer: scaled by the global batch
            loss = tf.nn.compute_average_loss(per_image, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        # autograph's zip takes no strict=; the lists come from one model, equal by design
        opt.apply_gradients(zip(grads, model.trainable_variables))  # noqa: B905
        hits = tf.equal(tf.argmax(logits, 1), tf.cast(y, tf.int64))
        return tf.reduce_mean(per_image), tf.reduce_mean(tf.cast(hits, tf.float32))

    @tf.function
    def step(x, y):
        loss, accuracy = strategy.run(replica, args=(x, y))
        local = strategy.experimental_local_results
        return local(loss)[0], local(accuracy)[0]

    return step


def main(argv: list[str] | None = None) -> int:
    phases = kitbench.Phases()
    a = parse_args(argv)
    launch = a.launch_time or phases.start
    mpi = kitbench.mpi_library()
    phases.mark("imports")
    comm = kitbench.mpi_comm()
    rank, size = comm.Get_rank(), comm.Get_size()
    if size > 1:
        os.environ["TF_CONFIG"] = tf_config(comm, rank)
    phases.mark("process_group")
    import tensorflow as tf

    phases.mark("imports")
    threads = kitbench.threads_per_rank(a.threads, size)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    if a.precision == "bf16":
        tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    kinds = tf.distribute.experimental.CommunicationImplementation
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:  # one replica a rank: this rank's GPU only
        tf.config.set_visible_devices(gpus[kitbench.local_rank() % len(gpus)], "GPU")
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=kinds.NCCL if gpus else kinds.RING
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    phases.mark("process_group")
    tf.keras.utils.set_random_seed(1234)  # the same initial weights on every worker
    side = MODELS[a.model]
    with strategy.scope():
        model = tf_cnn.build_model(tf, a.model, side)
    train_step = compiled_step(tf, strategy, model, a.batch_size * size)
    writer = tf.summary.create_file_writer(a.logdir) if a.logdir and rank == 0 else None
    data = tf_cnn.batches(tf, a, rank, size, side, comm.Barrier)
    agree = (lambda n: comm.bcast(n, root=0)) if size > 1 else None
    phases.mark("model_build")
    try:
        step_times, losses, accuracies, first_step_end = tf_cnn.train(
            tf, a, train_step, data, writer, size, agree, phases
        )
    except Exception as exc:
        if not kitbench.is_oom(exc):
            raise
        kitbench.oom_exit("tf-mwms", "tensorflow", tf.__version__, mpi, a, rank, size, threads, exc)
    mine = kitbench.rank_figures(
        rank, a.batch_size, step_times, first_step_end - launch, phases.seconds(a.launch_time)
    )
    ranks = comm.allgather(mine)
    weights = float(sum(abs(w).sum() for w in model.get_weights()))
    sums = comm.allgather(weights)
    if rank == 0:
        kitbench.emit(
            kitbench.record(
                "tf-mwms",
                "tensorflow",
                tf.__version__,
                mpi,
                a,
                ranks,
                threads,
                step_times,
                losses,
                accuracy=accuracies,
                weights_in_sync=kitbench.weights_in_sync(sums),
                device="gpu" if gpus else "cpu",
            )
        )
    kitbench.finalize()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # not through the strategy's teardown, which may wait on workers gone


if __name__ == "__main__":
    sys.exit(main())
