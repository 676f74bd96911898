"""The kit.bench/2 records the benchmarks declare (benchmarks/kitschema.py) and their shared
helpers (benchmarks/kitbench.py)."""

import argparse
import importlib
import os
import re
import time
from pathlib import Path

import kitbench
import kitschema
import pytest

BENCHMARKS = Path(kitbench.__file__).parent
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


def fake_proc(root: Path, started_s: float, uptime_s: float) -> str:
    """A /proc whose process started `started_s` after boot and whose uptime is `uptime_s`;
    the process's name holds spaces and a parenthesis, as a comm may."""
    fields = ["S", *["0"] * 18, str(round(started_s * os.sysconf("SC_CLK_TCK"))), *["0"] * 30]
    (root / "self").mkdir()
    (root / "self" / "stat").write_text(f"42 (py (x) y) {' '.join(fields)}\n")
    (root / "uptime").write_text(f"{uptime_s:.2f} 900.00\n")
    return str(root)


def test_phases_tell_the_runtimes_start_from_the_interpreters_and_add_up_marks(tmp_path):
    clock = iter([1000.0, 1001.25, 1001.5, 1003.0, 1003.5])
    phases = kitbench.Phases(lambda: next(clock), fake_proc(tmp_path, 500.0, 502.5))
    assert phases.created == 997.5  # 1000 - 502.5 + 500: created 2.5 s before main()
    for name in ("imports", "process_group", "imports", "model_build"):  # MPI's, then TF's
        phases.mark(name)
    assert list(phases.seconds(996.0).items()) == [
        ("runtime_start", 1.5),
        ("interpreter", 2.5),
        ("imports", 2.75),
        ("process_group", 0.25),
        ("model_build", 0.5),
    ]
    assert "runtime_start" not in phases.seconds(None)  # no --launch-time: no launch


def test_phases_leave_out_what_proc_cannot_say(tmp_path):
    assert kitbench.process_created(1000.0, str(tmp_path)) is None  # no /proc
    # an uptime virtualised (LXCFS) below the host's starttime: created after now
    assert kitbench.process_created(1000.0, fake_proc(tmp_path, 500.0, 3.0)) is None
    phases = kitbench.Phases(iter([10.0, 12.0]).__next__, str(tmp_path / "none"))
    phases.mark("imports")
    assert phases.seconds(5.0) == {"imports": 2.0}
    now = time.time()  # this process, from the real /proc
    assert 0 < now - kitbench.process_created(now) < 86400


def test_the_record_carries_the_phases_of_the_rank_that_started_last():
    a = argparse.Namespace(
        model="tiny", batch_size=32, data="synthetic", task="throughput", dist="ddp",
        precision="fp32", data_format="nchw", warmup=5, steps=2, min_time=0.0, logdir=None,
    )  # fmt: skip
    early = kitbench.rank_figures(0, 32, [0.5, 0.5], 2.0, {"imports": 1.0})
    late = kitbench.rank_figures(1, 32, [0.5, 0.6], 3.0, {"imports": 2.0})
    rec = kitbench.record("torch-cnn", "torch", "1.13.1", "none", a, [early, late], 1, [], [])
    assert (rec["startup_s"], rec["phases_s"]) == (3.0, {"imports": 2.0})
    assert kitschema.validate(rec) == []


def test_phases_are_an_optional_field_of_kit_bench_2():
    phases = {"runtime_start": 0.4, "imports": 2, "timed": 1.5}
    assert kitschema.SCHEMA == "kit.bench/2"
    assert kitschema.validate(TRAIN | {"phases_s": phases}) == []
    assert kitschema.validate(TRAIN) == []  # records before them still pass
    assert kitschema.validate(TRAIN | {"phases_s": [0.4]}) == ["phases_s: list, want dict"]
    assert kitschema.validate(TRAIN | {"phases_s": {"boot": 1.0, "imports": True}}) == [
        "phases_s: boot 1.0 is no declared phase's seconds",
        "phases_s: imports True is no declared phase's seconds",
    ]


def test_every_training_benchmark_marks_only_declared_phases_and_all_of_them():
    marked: set[str] = set()
    for b in kitschema.BENCHES.values():
        if b.metric:
            source = (BENCHMARKS / b.script).read_text()
            assert "kitbench.Phases()" in source, b.script
            marked |= set(re.findall(r'phases\.mark\("(\w+)"\)', source))
    # the first two are timed from /proc, the others marked where each phase ends (tf-mwms's
    # steps in tf_cnn.train)
    assert marked == set(kitschema.PHASES) - {"runtime_start", "interpreter"}
