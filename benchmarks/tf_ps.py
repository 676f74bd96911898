#!/usr/bin/env python3
"""TensorFlow parameter-server CNN training (between-graph replication), under any MPI launcher.

The form of distributed TensorFlow the studies compared Horovod with: every rank
is a worker with its own copy of the graph; the variables live on parameter-server
tasks (`replica_device_setter` spreads them round-robin), hosted by the first --ps
ranks in processes of their own servers, as co-located parameter servers are.
--ps-mode sync (the default) aggregates one gradient from every worker per step
(SyncReplicasOptimizer, as tf_cnn_benchmarks' parameter_server mode does); async
applies each worker's gradient as it arrives. The cluster spec comes from the
launcher's ranks: each rank's host and two free ports, gathered over MPI (mpi4py),
so the same command runs on one host or across Slurm nodes. Same models, data
modes and record (kit.bench/2) as tf-cnn; rank 0 prints it. Depends on tensorflow
and mpi4py.
"""

from __future__ import annotations  # Python 3.9 in the Caffe2 images

import argparse
import os
import socket
import sys
import time

import kitbench
import tf_cnn

MODELS = kitbench.MODELS  # all of them, with their input sizes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    kitbench.common_args(p, MODELS)
    p.add_argument(
        "--ps",
        type=int,
        default=1,
        help="parameter-server tasks, hosted by the first ranks (1 to the rank count)",
    )
    p.add_argument(
        "--ps-mode",
        choices=("sync", "async"),
        default="sync",
        help="sync: one aggregated update a step from every worker's gradient; async: "
        "each gradient applied as it arrives",
    )
    a = p.parse_args(argv)
    kitbench.check_args(p, a, MODELS)
    tf_cnn.channels_last(p, a)
    if a.precision == "bf16":
        kitbench.unsupported(p, "--precision bf16", "this graph is fp32; tf-cnn runs bf16")
    if a.ps < 1:
        p.error(f"--ps {a.ps} must be at least 1")
    a.dist = "parameter_server"
    return a


def cluster_spec(comm, ps: int) -> dict[str, list[str]]:
    """Workers: every rank; parameter servers: the first `ps` ranks, on ports of their own."""
    with socket.socket() as one, socket.socket() as two:  # held until all have theirs
        one.bind(("", 0))
        two.bind(("", 0))
        everyone = comm.allgather(
            (socket.gethostname(), one.getsockname()[1], two.getsockname()[1])
        )
    one_host = len({host for host, _, _ in everyone}) == 1
    name = (lambda host: "localhost") if one_host else (lambda host: host)
    return {
        "worker": [f"{name(h)}:{w}" for h, w, _ in everyone],
        "ps": [f"{name(h)}:{p}" for h, _, p in everyone[:ps]],
    }


def inputs(tf, a: argparse.Namespace, rank: int, size: int, side: int, comm):
    """The batch tensors on this worker, a feed function (accuracy mode) and what must be
    initialised with the local variables (the real-data pipeline)."""
    import numpy as np

    if a.data == "real":
        ds = tf_cnn.real_dataset(tf, a, rank, size, side, comm.Barrier)
        it = tf.compat.v1.data.make_initializable_iterator(ds)
        x, y = it.get_next()
        return x, y, None, [it.initializer, tf.compat.v1.tables_initializer()]
    if a.task == "accuracy":
        rng = np.random.default_rng(1234 + rank)
        x = tf.compat.v1.placeholder(tf.float32, (a.batch_size, side, side, 3))
        y = tf.compat.v1.placeholder(tf.int64, (a.batch_size,))

        def feed() -> dict:
            bx, by = kitbench.learnable_batch(rng, a.batch_size, side, channels_last=True)
            return {x: bx, y: by}

        return x, y, feed, []
    local = [tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
    x = tf.compat.v1.Variable(
        tf.random.normal((a.batch_size, side, side, 3), seed=rank), False, local, name="x"
    )
    y = tf.compat.v1.Variable(
        tf.random.uniform((a.batch_size,), 0, kitbench.CLASSES, tf.int64, seed=rank),
        False,
        local,
        name="y",
    )
    return x, y, None, []


def main(argv: list[str] | None = None) -> int:
    phases = kitbench.Phases()
    a = parse_args(argv)
    launch = a.launch_time or phases.start
    mpi = kitbench.mpi_library()
    phases.mark("imports")
    comm = kitbench.mpi_comm()
    rank, size = comm.Get_rank(), comm.Get_size()
    if a.ps > size:
        if rank == 0:
            print(f"tf-ps: --ps {a.ps} is more than the {size} ranks", file=sys.stderr)
        return 2
    phases.mark("process_group")
    import tensorflow as tf

    phases.mark("imports")
    tf.compat.v1.disable_eager_execution()
    threads = kitbench.threads_per_rank(a.threads, size)
    cluster = tf.train.ClusterSpec(cluster_spec(comm, a.ps))
    worker = f"/job:worker/task:{rank}"
    config = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=threads,
        inter_op_parallelism_threads=2,
        device_filters=["/job:ps", worker],
    )
    server = tf.distribute.Server(cluster, "worker", rank, config=config)
    if rank < a.ps:  # kept referenced: it serves the variables until every worker is done
        ps_server = tf.distribute.Server(cluster, "ps", rank, config=config)  # noqa: F841
    phases.mark("process_group")
    tf.compat.v1.set_random_seed(1234)
    side = MODELS[a.model]
    with tf.device(worker):
        x, y, feed, data_init = inputs(tf, a, rank, size, side, comm)
    setter = tf.compat.v1.train.replica_device_setter(worker_device=worker, cluster=cluster)
    with tf.compat.v1.device(setter):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        model = tf_cnn.build_model(tf, a.model, side)
        logits = model(x, training=True)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(y, logits)
        opt = tf.compat.v1.train.MomentumOptimizer(0.01, 0.9)
        if a.ps_mode == "sync":
            opt = tf.compat.v1.train.SyncReplicasOptimizer(opt, size, total_num_replicas=size)
        with tf.control_dependencies(model.get_updates_for(x) + model.get_updates_for(None)):
            train_op = opt.minimize(loss, global_step, var_list=model.trainable_variables)
        hits = tf.equal(tf.argmax(logits, 1), tf.cast(y, tf.int64))
        accuracy = tf.reduce_mean(tf.cast(hits, tf.float32))
    hooks = [opt.make_session_run_hook(rank == 0)] if a.ps_mode == "sync" else []
    local_init = tf.group(tf.compat.v1.local_variables_initializer(), *data_init)
    scaffold = tf.compat.v1.train.Scaffold(local_init_op=local_init)
    writer = tf.compat.v1.summary.FileWriter(a.logdir) if a.logdir and rank == 0 else None
    step_times, losses, accuracies, first_step_end = [], [], [], None
    try:
        # The others start their sessions once the chief has initialised the variables:
        # finding them uninitialised, a worker would sleep 30 s before looking again.
        if rank != 0:
            comm.Barrier()
        sess = tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target,
            is_chief=rank == 0,
            hooks=hooks,
            scaffold=scaffold,
            config=config,
            log_step_count_steps=None,
        )
        if rank == 0:
            comm.Barrier()
        phases.mark("model_build")  # the graph, its variables initialised on the servers
        # Sync workers step together: a worker that ran ahead would put two gradients into
        # one aggregation, and at the end another would wait for a token nobody makes.
        lockstep = a.ps_mode == "sync" and size > 1
        durations: list[float] = []
        agree = (lambda n: comm.bcast(n, root=0)) if size > 1 else None
        for i in kitbench.step_indices(a, durations, agree):
            if i == a.warmup:
                phases.mark("warmup")
            t0 = time.perf_counter()
            _, lv, av = sess.run([train_op, loss, accuracy], feed_dict=feed() if feed else None)
            dt = time.perf_counter() - t0
            if lockstep:
                comm.Barrier()
            durations.append(dt)
            if first_step_end is None:
                first_step_end = time.time()
            if writer:
                values = [
                    ("loss", lv),
                    ("accuracy", av),
                    ("images_per_sec", a.batch_size * size / dt),
                ]
                summary = tf.compat.v1.Summary(
                    value=[tf.compat.v1.Summary.Value(tag=t, simple_value=v) for t, v in values]
                )
                writer.add_summary(summary, i)
            if i >= a.warmup:
                step_times.append(dt)
                losses.append(float(lv))
                accuracies.append(float(av))
    except Exception as exc:
        if not kitbench.is_oom(exc):
            raise
        kitbench.oom_exit("tf-ps", "tensorflow", tf.__version__, mpi, a, rank, size, threads, exc)
    phases.mark("timed")
    if writer:
        writer.close()
    mine = kitbench.rank_figures(
        rank, a.batch_size, step_times, first_step_end - launch, phases.seconds(a.launch_time)
    )
    ranks = comm.allgather(mine)
    if rank == 0:
        kitbench.emit(
            kitbench.record(
                "tf-ps",
                "tensorflow",
                tf.__version__,
                mpi,
                a,
                ranks,
                threads,
                step_times,
                losses,
                accuracy=accuracies,
                ps_tasks=a.ps,
                ps_mode=a.ps_mode,
            )
        )
    kitbench.finalize()  # every worker is done: the parameter servers may go
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # not through the session's and servers' teardown, which waits on peers gone


if __name__ == "__main__":
    sys.exit(main())
