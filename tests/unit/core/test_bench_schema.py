"""The kit.bench/2 records the benchmarks declare (benchmarks/kitschema.py) and their shared
helpers (benchmarks/kitbench.py)."""

import importlib
from pathlib import Path

import kitbench
import kitschema
import pytest

TRAIN = {
    "schema": "kit.bench/2", "bench": "torch-cnn", "status": "ok", "framework": "torch",
    "framework_version": "1.13.1", "mpi_library": "MPICH Version: 4.0.2", "python": "3.11.2",
    "image": "native", "ranks": 2, "hosts": ["vm"], "transport": "one host", "startup_s": 1.5,
    "model": "tiny",
    "batch_size": 32, "data": "synthetic", "task": "throughput", "dist": "ddp",
    "precision": "fp32", "data_format": "nchw", "threads_per_rank": 1, "warmup_steps": 5,
    "steps": 2, "min_time_s": 0.0, "images_per_sec": 100.0, "images_per_sec_per_rank": [50.0, 50.0],
    "peak_rss_mb": [300.0, 301.0], "step_times_s": [0.6, 0.7], "loss": [2.3, 2.2],
}  # fmt: skip
MPI = {
    **{k: TRAIN[k] for k in kitschema.COMMON},
    "bench": "mpi",
    "framework": "mpi4py",
    "p2p": [{"bytes": 4, "iterations": 9, "latency_us": 0.5, "bandwidth_mb_s": 8.0}],
    "allreduce": [{"bytes": 4, "iterations": 9, "latency_us": 1.0}],
}
ALLGATHER = {
    **{k: TRAIN[k] for k in kitschema.COMMON},
    "bench": "allgather",
    "framework": "mpi4py",
    "allgather": [{"bytes": 4, "iterations": 9, "latency_us": 2.0, "bandwidth_mb_s": 4.0}],
}
GRPC = {
    **{k: TRAIN[k] for k in kitschema.COMMON},
    "bench": "grpc",
    "framework": "grpcio",
    "framework_version": "1.74.0",
    "servers": 1,
    "buffers": 8,
    "p2p": [{"payload": "skew", "mode": "serialized", "bytes": 8, "iterations": 9,
             "latency_us": 90.0, "bandwidth_mb_s": 0.1}],
    "ps": [{"payload": "skew", "mode": "serialized", "bytes": 8, "iterations": 9,
            "throughput_mb_s": 0.2}],
}  # fmt: skip


def test_valid_records_pass():
    assert kitschema.validate(TRAIN) == []
    assert kitschema.validate(MPI) == []
    assert kitschema.validate(GRPC) == []
    assert kitschema.validate(ALLGATHER) == []
    assert kitschema.validate(GRPC | {"ps": None}) == ["ps: NoneType, want list"]
    oom = TRAIN | {"status": "oom", "images_per_sec": None, "error": "out of memory"}
    assert kitschema.validate(oom) == []


def test_each_problem_is_named():
    bad = TRAIN | {"schema": "kit.bench/1", "ranks": "2", "status": "crashed"}
    del bad["loss"]
    assert kitschema.validate(bad) == [
        "schema is 'kit.bench/1', not kit.bench/2",
        "ranks: str, want int",
        "loss: NoneType, want list",
        "status 'crashed' is neither ok nor oom",
    ]
    assert kitschema.validate(MPI | {"allreduce": None}) == ["allreduce: NoneType, want list"]
    # an ok record must carry a figure
    assert kitschema.validate(TRAIN | {"images_per_sec": None}) == [
        "images_per_sec: NoneType, want float"
    ]
    # a sweep's rows hold what its declaration tables and draws
    row = {"bytes": 4, "iterations": 9}
    assert kitschema.validate(MPI | {"allreduce": [row]}) == ["allreduce: a row without latency_us"]
    assert kitschema.validate(MPI | {"bench": "mpi2"}) == ["bench 'mpi2' is not declared"]


def test_oom_is_recognised_across_frameworks():
    assert kitbench.is_oom(MemoryError())
    assert kitbench.is_oom(
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:75] DefaultCPUAllocator: can't allocate memory"
        )
    )
    assert kitbench.is_oom(type("ResourceExhaustedError", (Exception,), {})("OOM"))
    assert not kitbench.is_oom(RuntimeError("shape mismatch"))


def test_learnable_problem_is_the_same_on_every_rank():
    import numpy as np

    x0, y0 = kitbench.learnable_batch(np.random.default_rng(1), 64, 8)
    x1, y1 = kitbench.learnable_batch(np.random.default_rng(2), 64, 8)
    assert x0.shape == (64, 3, 8, 8) and x0.dtype == np.float32 and y0.dtype == np.int64
    # class colours are shared: mean colour per class agrees across two ranks' draws
    for k in set(y0.tolist()) & set(y1.tolist()):
        m0 = x0[y0 == k].mean(axis=(0, 2, 3))
        m1 = x1[y1 == k].mean(axis=(0, 2, 3))
        assert np.allclose(m0, m1, atol=0.5)
    nhwc, _ = kitbench.learnable_batch(np.random.default_rng(1), 64, 8, channels_last=True)
    assert nhwc.shape == (64, 8, 8, 3) and np.array_equal(nhwc, x0.transpose(0, 2, 3, 1))


def test_dataset_is_made_once_and_reused(tmp_path):
    calls = []
    root = kitbench.ensure_dataset(str(tmp_path), 20, 16, 0, lambda: calls.append(1))
    files = sorted(Path(root).rglob("*.jpg"))
    assert len(files) == 20 and len({f.parent.name for f in files}) == kitbench.CLASSES
    stamp = Path(root, kitbench.DATASET_STAMP)
    before = stamp.stat().st_mtime_ns
    assert kitbench.ensure_dataset(str(tmp_path), 20, 16, 0, lambda: calls.append(1)) == root
    assert stamp.stat().st_mtime_ns == before and calls == [1, 1]


@pytest.mark.parametrize(
    ("bench", "argv", "message"),
    [
        (
            "caffe2_cnn",
            ["--precision", "bf16"],
            "--precision bf16 is not supported here: the Caffe2 in PyTorch's wheel trains in "
            "fp32 on a CPU",
        ),
        (
            "caffe2_cnn",
            ["--data-format", "nhwc"],
            "--data-format nhwc is not supported here: the Caffe2 in PyTorch's wheel's CPU "
            "nets here are NCHW",
        ),
        (
            "tf_cnn",
            ["--data-format", "nchw"],
            "--data-format nchw is not supported here: TensorFlow's CPU convolutions take "
            "NHWC only; use nhwc",
        ),
    ],
)
def test_what_a_framework_cannot_do_is_refused_by_name(bench, argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(bench).parse_args(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: {message}")


def test_bf16_and_nhwc_are_taken_where_the_framework_has_them():
    import tf_cnn
    import torch_cnn

    a = torch_cnn.parse_args(["--precision", "bf16", "--data-format", "nhwc"])
    assert (a.precision, a.data_format) == ("bf16", "nhwc")
    assert torch_cnn.parse_args([]).data_format == "nchw"
    assert tf_cnn.parse_args(["--precision", "bf16"]).data_format == "nhwc"


@pytest.mark.parametrize(
    ("scheme", "total", "want"),
    [
        ("uniform", 64, [8] * 8),
        ("uniform", 20, [2, 3, 2, 3, 2, 3, 2, 3]),
        ("skew", 4096, [4040] + [8] * 7),
        ("skew", 64, [57] + [1] * 7),
        ("skew", 1 << 20, [(1 << 20) - 7 * 2048] + [2048] * 7),
        ("uniform", 5, [1] * 5),  # fewer bytes than buffers: one byte each
    ],
)
def test_grpc_payload_shapes(scheme, total, want):
    """TF-gRPC-Bench's shapes: equal buffers, or one holding nearly everything."""
    import random

    import grpc_bench

    assert grpc_bench.split(total, scheme, random.Random(0)) == want


def test_grpc_random_payloads_cover_the_total_and_are_seeded():
    import random

    import grpc_bench

    cuts = [grpc_bench.split(4096, "random", random.Random(s)) for s in (1, 1, 2)]
    assert all(sum(c) == 4096 and len(c) == 8 and min(c) >= 1 for c in cuts)
    assert cuts[0] == cuts[1] != cuts[2]
