#!/usr/bin/env python3
"""TensorFlow 2 / Keras CNN training benchmark with Horovod, under any MPI launcher.

Each step is one compiled tf.function: forward and loss under a GradientTape,
Horovod's DistributedGradientTape averaging the gradients, SGD applying them
(the leanest idiomatic TF2 + Horovod step; Keras' train_on_batch measured ~6 %
slower). Rank 0's initial weights are broadcast before the first step, as in
Horovod's examples. Models come from keras.applications (random weights).
--data real reads the JPEG folder through tf.data (each rank its own shard).
Rank 0 prints one JSON record (schema kit.bench/2) on stdout and a one-line
summary on stderr. Depends on tensorflow and horovod (PIL to generate --data real).
"""

from __future__ import annotations  # Python 3.9 in the Caffe2 images

import argparse
import os
import sys
import time

import kitbench

MODELS = kitbench.MODELS  # all of them, with their input sizes
APPLICATIONS = {
    "resnet50": "ResNet50",
    "resnet101": "ResNet101",
    "resnet152": "ResNet152",
    "inception3": "InceptionV3",
}


def parse_args(
    argv: list[str] | None, description: str = __doc__.splitlines()[0], dist: str = "horovod"
) -> argparse.Namespace:
    """The options of a TensorFlow 2 training benchmark (tf-cnn's, and tf-mwms's)."""
    p = argparse.ArgumentParser(description=description)
    kitbench.common_args(p, MODELS)
    a = p.parse_args(argv)
    kitbench.check_args(p, a, MODELS)
    channels_last(p, a)
    a.dist = dist
    return a


def channels_last(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """NHWC, the default here, as TensorFlow's CPU convolutions take no other layout."""
    a.data_format = a.data_format or "nhwc"
    if a.data_format == "nchw":
        kitbench.unsupported(
            p, "--data-format nchw", "TensorFlow's CPU convolutions take NHWC only; use nhwc"
        )


def build_model(tf, name: str, side: int):
    """The model as a functional Keras model (Keras 2 and 3 alike), logits in float32."""
    layers = tf.keras.layers
    shape = (side, side, 3)
    if name == "tiny":
        stack = [
            layers.Conv2D(16, 3, padding="same", activation="relu"),
            layers.MaxPool2D(2),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.GlobalAveragePooling2D(),
            layers.Dense(kitbench.CLASSES),
        ]
    elif name == "alexnet":  # the single-tower form torchvision uses
        stack = [
            layers.Conv2D(64, 11, 4, padding="same", activation="relu"),
            layers.MaxPool2D(3, 2),
            layers.Conv2D(192, 5, padding="same", activation="relu"),
            layers.MaxPool2D(3, 2),
            layers.Conv2D(384, 3, padding="same", activation="relu"),
            layers.Conv2D(256, 3, padding="same", activation="relu"),
            layers.Conv2D(256, 3, padding="same", activation="relu"),
            layers.MaxPool2D(3, 2),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(4096, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(4096, activation="relu"),
            layers.Dense(kitbench.CLASSES),
        ]
    else:
        body = getattr(tf.keras.applications, APPLICATIONS[name])(
            weights=None, input_shape=shape, classes=kitbench.CLASSES, classifier_activation=None
        )
        stack = [body]
    inputs = tf.keras.Input(shape)
    x = inputs
    for layer in stack:
        x = layer(x)
    # logits in float32 whatever the compute precision, for a stable loss
    return tf.keras.Model(inputs, layers.Activation("linear", dtype="float32")(x))


def compiled_step(tf, hvd_tf, model):
    """One training step as a tf.function: loss and accuracy of the batch it trained on."""
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt = tf.keras.optimizers.legacy.SGD(0.01, momentum=0.9)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        tape = hvd_tf.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        # autograph's zip takes no strict=; the lists come from one model, equal by design
        opt.apply_gradients(zip(grads, model.trainable_variables))  # noqa: B905
        hits = tf.equal(tf.argmax(logits, 1), tf.cast(y, tf.int64))
        return loss, tf.reduce_mean(tf.cast(hits, tf.float32))

    return step


def real_dataset(tf, a: argparse.Namespace, rank: int, size: int, side: int, barrier):
    """The JPEG folder through tf.data: this rank's shard, decoded and batched."""
    root = kitbench.ensure_dataset(a.data_dir, a.dataset_images, side, rank, barrier)
    classes = sorted(n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n)))
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            classes, list(range(len(classes))), tf.string, tf.int64
        ),
        default_value=-1,
    )
    mean = tf.constant([0.485, 0.456, 0.406])
    std = tf.constant([0.229, 0.224, 0.225])

    def load(path):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        image = tf.image.random_flip_left_right(tf.image.convert_image_dtype(image, tf.float32))
        label = table.lookup(tf.strings.split(path, os.sep)[-2])
        return (image - mean) / std, label

    files = tf.data.Dataset.list_files(os.path.join(root, "*", "*.jpg"), shuffle=False)
    ds = (
        files.shard(size, rank)
        .shuffle(a.dataset_images, seed=rank)
        .repeat()
        .map(load, num_parallel_calls=tf.data.AUTOTUNE)
        .batch(a.batch_size, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )
    return ds


def batches(tf, a: argparse.Namespace, rank: int, size: int, side: int, barrier):
    import numpy as np

    if a.data == "real":
        yield from iter(real_dataset(tf, a, rank, size, side, barrier))
        return
    rng = np.random.default_rng(1234 + rank)
    if a.task == "accuracy":
        while True:
            x, y = kitbench.learnable_batch(rng, a.batch_size, side, channels_last=True)
            yield tf.constant(x), tf.constant(y)
    x = tf.random.normal((a.batch_size, side, side, 3), seed=rank)
    y = tf.random.uniform((a.batch_size,), 0, kitbench.CLASSES, tf.int64, seed=rank)
    while True:
        yield x, y


def train(tf, a: argparse.Namespace, step, data, writer, size: int, agree, phases: kitbench.Phases):
    """The training loop of the TensorFlow 2 benchmarks (tf-cnn, tf-mwms): step(x, y) on
    each batch of data, rank 0's scalars to the TensorBoard writer (closed at the end),
    the warm-up and the timed steps marked in phases; returns the timed steps' durations,
    losses and accuracies and when the first step ended. agree: as kitbench.step_indices
    takes it."""
    step_times, losses, accuracies, first_step_end = [], [], [], None
    durations: list[float] = []
    for i in kitbench.step_indices(a, durations, agree):
        if i == a.warmup:
            phases.mark("warmup")
        t0 = time.perf_counter()
        x, y = next(data)
        loss, accuracy = (float(v) for v in step(x, y))
        dt = time.perf_counter() - t0
        durations.append(dt)
        if first_step_end is None:
            first_step_end = time.time()
        if writer:
            with writer.as_default(step=i):
                tf.summary.scalar("loss", loss)
                tf.summary.scalar("accuracy", accuracy)
                tf.summary.scalar("images_per_sec", a.batch_size * size / dt)
        if i >= a.warmup:
            step_times.append(dt)
            losses.append(loss)
            accuracies.append(accuracy)
    phases.mark("timed")
    if writer:
        writer.close()
    return step_times, losses, accuracies, first_step_end


def main(argv: list[str] | None = None) -> int:
    phases = kitbench.Phases()
    a = parse_args(argv)
    launch = a.launch_time or phases.start
    mpi = kitbench.mpi_library()
    import horovod.tensorflow as hvd_tf
    import horovod.tensorflow.keras as hvd
    import tensorflow as tf

    phases.mark("imports")
    kitbench.mpi_comm()  # MPI started (and finalised, at the end) by this thread
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    phases.mark("process_group")
    threads = kitbench.threads_per_rank(a.threads, size)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    if a.precision == "bf16":
        tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    tf.keras.utils.set_random_seed(1234)
    side = MODELS[a.model]
    model = build_model(tf, a.model, side)
    train_step = compiled_step(tf, hvd_tf, model)
    hvd_tf.broadcast_variables(model.variables, root_rank=0)

    def barrier() -> None:  # horovod.tensorflow 0.28 has no barrier(); any collective waits
        hvd_tf.allgather_object(rank)

    writer = tf.summary.create_file_writer(a.logdir) if a.logdir and rank == 0 else None
    data = batches(tf, a, rank, size, side, barrier)
    agree = (lambda n: hvd_tf.broadcast_object(n, root_rank=0)) if size > 1 else None
    phases.mark("model_build")
    try:
        step_times, losses, accuracies, first_step_end = train(
            tf, a, train_step, data, writer, size, agree, phases
        )
    except Exception as exc:
        if not kitbench.is_oom(exc):
            raise
        kitbench.oom_exit("tf-cnn", "tensorflow", tf.__version__, mpi, a, rank, size, threads, exc)
    mine = kitbench.rank_figures(
        rank, a.batch_size, step_times, first_step_end - launch, phases.seconds(a.launch_time)
    )
    ranks = hvd_tf.allgather_object(mine) if size > 1 else [mine]
    weights = float(sum(abs(w).sum() for w in model.get_weights()))
    sums = hvd_tf.allgather_object(weights) if size > 1 else [weights]
    if rank == 0:
        kitbench.emit(
            kitbench.record(
                "tf-cnn",
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
            )
        )
    hvd.shutdown()
    kitbench.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
