"""Every benchmark entry point through `kit run`, natively and in its image, 1 and 2 ranks.

Records must validate against kit.bench/2 (benchmarks/kitbench.py); the MPI
sweep must be sane; real data must reach every container runtime through its
bind; accuracy mode must learn and write TensorBoard events that TensorBoard
reads; a batch that cannot fit must come back as an "oom" result.
"""

import json
import os
import subprocess
from pathlib import Path

import kitbench
import kitschema
import pytest

from kit.core import readers
from kit.image import recipes

from .conftest import HOROVOD_TAG, RUNTIMES, in_image, kit, records, short_sweeps

pytestmark = pytest.mark.integration

SITE_DATA = Path("/srv/kit-test-data")


def campaign(image: str, runtimes: str, benches: str, out: Path, *extra: str) -> list[dict]:
    kit(
        *("run", image, "--runtime", runtimes, "--bench", benches, "--np", "1,2"),
        *("--repeats", "1", "--warmup-trials", "0", "--steps", "6", "--warmup-steps", "1"),
        *("--baseline-launches", "1"),  # one trial a runtime: the records are what is checked
        *("--timeout", "240", "--out", str(out), *short_sweeps(benches), *extra),
        timeout=5400,
    )
    return records(out)


def check(recs: list[dict], runtimes: str, benches: str, data: tuple[str, ...] = ("synthetic",)):
    """Every (runtime, bench, ranks, data) ran, finished ok, and its record validates."""
    want = {
        (rt, b, n, d if b not in ("mpi", "allgather", "grpc") else "synthetic")
        for rt in runtimes.split(",")
        for b in benches.split(",")
        for n in (1, 2)
        for d in data
    }
    assert {(r["runtime"], r["bench"], r["ranks"], r["data"]) for r in recs} == want
    for r in recs:
        where = (r["runtime"], r["bench"], r["ranks"], r["stuck"], r["output_tail"][-4000:])
        assert r["status"] == "ok", where
        assert kitschema.validate(r["result"]) == [], (r["runtime"], r["bench"])
        assert r["result"]["ranks"] == r["ranks"]
        assert r["result"].get("weights_in_sync", r["bench"] != "torch-cnn"), where
        if r["bench"] == "mpi":
            check_sweep(r["result"])
        elif r["bench"] == "allgather":
            check_allgather(r["result"])
        elif r["bench"] == "grpc":
            check_grpc(r["result"])
        else:
            assert r["result"]["data"] == r["data"]
            assert len(r["result"]["images_per_sec_per_rank"]) == r["ranks"]


def least(rows: list[dict], key: str) -> float:
    """The least `key` among the smaller half of a sweep's sizes. A shape check compares
    the largest size's data rate with that, never latencies: ranks that spin for a message
    and lose their core to another process wait a scheduler tick (4 ms) at any size, so
    one burst of load slowed 4 B past 4 MiB (2.7 ms against 2.66 ms, beside an image
    build). A rate cannot be turned round so: 4 MiB moved in a tick's time is still about
    a hundred times what 4 B moves in a microsecond."""
    return min(row[key] for row in rows[: max(1, len(rows) // 2)])


def rates(rows: list[dict]) -> list[dict]:
    """Each row with the bytes it moved per microsecond, for a sweep that states latency
    only."""
    return [{**row, "bytes_per_us": row["bytes"] / row["latency_us"]} for row in rows]


def check_grpc(res: dict) -> None:
    """Every payload shape and mode at every size, latencies and throughputs positive; with
    2 ranks the largest payload moves more MB/s than the smallest sizes."""
    combos = {(row["payload"], row["mode"]) for row in res["p2p"]}
    assert len(combos) == 6 and len(res["p2p"]) == len(res["ps"]) == 6 * 7
    assert all(row["latency_us"] > 0 and row["bandwidth_mb_s"] > 0 for row in res["p2p"])
    assert all(row["throughput_mb_s"] > 0 for row in res["ps"])
    first = res["p2p"][:7]  # one payload shape and mode, by size
    assert (first[0]["bytes"], first[6]["bytes"]) == (8, 2 << 20)
    assert first[6]["bandwidth_mb_s"] > least(first, "bandwidth_mb_s")


def check_sweep(res: dict) -> None:
    """Every size from 4 B to 4 MiB timed, and the largest moves more bytes a second than
    the small ones (allreduce; ping-pong too with 2 ranks)."""
    red = rates(res["allreduce"])
    assert red[0]["bytes"] == 4 and red[-1]["bytes"] == 4 << 20
    assert all(row["latency_us"] > 0 for row in red)
    assert red[-1]["bytes_per_us"] > least(red, "bytes_per_us")
    if res["ranks"] == 1:
        assert res["p2p"] == []
        return
    p2p = res["p2p"]
    assert all(row["latency_us"] > 0 and row["bandwidth_mb_s"] > 0 for row in p2p)
    assert p2p[-1]["bandwidth_mb_s"] > least(p2p, "bandwidth_mb_s")


def check_allgather(res: dict) -> None:
    """Gathering 4 MiB from each rank moves more MB/s than the small sizes."""
    rows = res["allgather"]
    assert (rows[0]["bytes"], rows[-1]["bytes"]) == (4, 4 << 20)
    assert all(row["latency_us"] > 0 and row["bandwidth_mb_s"] > 0 for row in rows)
    assert rows[-1]["bandwidth_mb_s"] > least(rows, "bandwidth_mb_s")


@pytest.fixture
def site_data():
    """A read-only JPEG set where no runtime looks by default (Apptainer binds /tmp,
    /var/tmp and $HOME on its own), as a site's shared data set would be: only kit's
    bind can make it visible inside a container. ci/test (as root) makes the folder."""
    if not os.access(SITE_DATA, os.W_OK):
        pytest.fail(f"{SITE_DATA} must exist and be writable by this user (ci/test makes it)")
    root = Path(kitbench.ensure_dataset(str(SITE_DATA), 512, 32, 0, lambda: None))
    files = sorted(root.rglob("*"))
    for f in [root, *files]:
        f.chmod(f.stat().st_mode & ~0o222)
    yield root, {f: f.stat().st_mtime_ns for f in files}
    for f in [root, *files]:
        f.chmod(f.stat().st_mode | 0o200)


def test_pytorch_and_mpi_in_every_runtime_with_real_data(built, site_data, tmp_path):
    """torch-cnn (synthetic and real JPEGs from a read-only folder outside every default
    bind), the MPI sweep and the allgather sweep; the report shows I/O overhead and the
    sweeps' tables, and draws them. Also: a benchmark's options reach it (--bench-arg), and
    --mpirun is the launcher used on the host (a wrapper that logs its calls)."""
    root, before = site_data
    out = tmp_path / "run"
    calls = tmp_path / "mpirun.calls"
    wrapper = tmp_path / "mpirun-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec mpirun.mpich "$@"\n')
    wrapper.chmod(0o755)
    recs = campaign(
        "pytorch-mpich",
        RUNTIMES,
        "torch-cnn,mpi,allgather",
        out,
        *("--data", "synthetic,real", "--data-dir", str(SITE_DATA)),
        *("--bench-arg=torch-cnn:--precision=bf16", "--bench-arg=torch-cnn:--data-format=nhwc"),
        *("--mpirun", str(wrapper)),
    )
    # a runtime that did not see the folder would have tried to make it, and failed
    check(recs, RUNTIMES, "torch-cnn,mpi,allgather", ("synthetic", "real"))
    assert {f: f.stat().st_mtime_ns for f in root.rglob("*")} == before
    inside = {"docker", "podman"}  # these start ranks with the image's own mpirun
    launched = [line for line in calls.read_text().splitlines() if line.startswith("-np 2 ")]
    pairs = [r for r in recs if r["ranks"] == 2]
    assert len(launched) == len([r for r in pairs if r["runtime"] not in inside])
    assert {r["launcher"] for r in pairs if r["runtime"] in inside} == {"mpirun in container"}
    for r in recs:
        res = r["result"]
        assert res["mpi_library"].startswith("MPICH Version:")
        assert r["mpirun"] == (None if r["ranks"] == 1 else "MPICH (Hydra) 4.0.2")
        assert r["image_digest"].startswith("native:" if r["runtime"] == "native" else "sha256:")
        if r["bench"] == "torch-cnn":
            assert res["images_per_sec"] > 0 and res["startup_s"] > 0
            assert (res["precision"], res["data_format"]) == ("bf16", "nhwc")
    assert len({r["result"]["framework_version"] for r in recs if r["bench"] == "torch-cnn"}) == 1
    text = kit("report", str(out)).stdout
    assert (
        "## I/O overhead" in text
        and "## MPI (mpi4py): allreduce, float32 sum over all ranks" in text
    )
    assert "## MPI allgather (mpi4py): allgather, float32 from every rank to every rank" in text
    for rt in RUNTIMES.split(","):
        assert f"| pytorch-mpich | 2 | local | one host | {rt} | 1 | 4 |" in text
        assert f"| {rt} | 1 |" in text  # a row of the throughput tables
    kit("report", str(out), "--format", "html")
    page = (out / "report.html").read_text()
    assert 'id="allgather-allgather-bandwidth_mb_s-pytorch-mpich-np2"' in page


def test_horovod_entry_points_native_and_in_the_image(horovod, tmp_path):
    """tf-cnn (Keras + Horovod), torch-hvd, TensorFlow's parameter server (tf-ps) and the
    gRPC sweep natively (Horovod from the image's own wheels, the same binaries) and in
    Docker; weights agree across ranks after Horovod training."""
    benches = "tf-cnn,tf-ps,torch-hvd,mpi,grpc"
    recs = campaign("horovod-mpich", "native,docker", benches, tmp_path / "run")
    check(recs, "native,docker", benches)
    image_id = next(r["image_digest"] for r in recs if r["runtime"] == "docker")
    native = {r["image_digest"] for r in recs if r["runtime"] == "native"}
    assert len(native) == 1 and native.pop().endswith(f" (wheels of {HOROVOD_TAG} {image_id})")
    tf = [r["result"] for r in recs if r["bench"] == "tf-cnn"]
    assert all(r["weights_in_sync"] and r["dist"] == "horovod" for r in tf)
    assert {r["result"]["dist"] for r in recs if r["bench"] == "torch-hvd"} == {"horovod"}
    ps = [r["result"] for r in recs if r["bench"] == "tf-ps"]
    assert {(r["dist"], r["ps_mode"], r["ps_tasks"]) for r in ps} == {
        ("parameter_server", "sync", 1)
    }
    text = kit("report", str(tmp_path / "run")).stdout
    assert "## gRPC: Echo from rank 0 to rank 1" in text
    assert (
        "| horovod-mpich | 2 | local | one host | docker | 1 | skew | serialized | 2097152 |"
        in text
    )


def test_parameter_server_and_grpc_in_apptainer_and_charliecloud(horovod, tmp_path):
    """tf-ps (its cluster spec from the launcher's ranks) and the gRPC sweep where each
    rank is a container of its own (hybrid MPI); then two parameter servers beside two
    workers (2 + 2) in every runtime."""
    runtimes, benches = "singularity,charliecloud", "tf-ps,grpc"
    recs = campaign("horovod-mpich", runtimes, benches, tmp_path / "run")
    check(recs, runtimes, benches)
    every = f"native,docker,{runtimes}"
    kit(
        *("run", "horovod-mpich", "--runtime", every, "--bench", "tf-ps", "--np", "2"),
        *("--repeats", "1", "--warmup-trials", "0", "--steps", "6", "--warmup-steps", "1"),
        *("--bench-arg=--ps=2", "--baseline-launches", "1", "--timeout", "240"),
        *("--out", str(tmp_path / "ps2")),
        timeout=1800,
    )
    recs = records(tmp_path / "ps2")
    assert sorted(r["runtime"] for r in recs) == sorted(every.split(","))
    for r in recs:
        assert r["status"] == "ok", (r["runtime"], r["output_tail"][-3000:])
        assert kitschema.validate(r["result"]) == []
        assert (r["result"]["ps_tasks"], r["result"]["ranks"]) == (2, 2)


def test_caffe2_entry_points_in_the_image(caffe2, tmp_path):
    """Caffe2 runs in its image only: its wheel needs Python 3.9 (Debian bullseye), so
    the native runtime on this bookworm host cannot have the same software."""
    recs = campaign("caffe2-mpich", "docker", "caffe2-cnn,mpi", tmp_path / "run")
    check(recs, "docker", "caffe2-cnn,mpi")
    assert all(r["result"]["weights_in_sync"] for r in recs if r["bench"] == "caffe2-cnn")


def test_todays_pytorch_natively_and_in_every_runtime_then_compiled(pytorch2, tmp_path):
    """PyTorch 2.13 (the host's pip's CPU wheel, the same file natively and in the image,
    no torchvision): DDP at 1 and 2 ranks in every runtime; 2 ranks started by torchrun
    inside each runtime; then torch.compile, whose compile is timed apart."""
    every = "native,docker,podman,singularity,charliecloud"
    recs = campaign("pytorch2-mpich", every, "torch-cnn", tmp_path / "run")
    check(recs, every, "torch-cnn")
    assert {r["result"]["framework_version"] for r in recs} == {"2.13.0+cpu"}
    assert {r["recipe_version"] for r in recs} == {recipes.load("pytorch2-mpich").version}
    recs = campaign(
        "pytorch2-mpich", every, "torch-cnn", tmp_path / "torchrun",
        "--np", "2", "--launcher", "torchrun",
    )  # fmt: skip
    assert sorted(r["runtime"] for r in recs) == sorted(every.split(","))
    for r in recs:
        assert r["status"] == "ok" and r["launcher"] == "torchrun", r["output_tail"][-3000:]
        assert len(r["result"]["images_per_sec_per_rank"]) == r["result"]["ranks"] == 2
        assert r["result"]["weights_in_sync"], r["runtime"]
    # compiled in one runtime (the benchmark's code is the same natively; inductor's kernels
    # there depend on the host's libraries, which the report checks: see compile_isa)
    (r,) = campaign(
        "pytorch2-mpich", "docker", "torch-cnn", tmp_path / "compiled",
        "--np", "1", "--bench-arg", "torch-cnn:--compile",
    )  # fmt: skip
    res = r["result"]
    assert r["status"] == "ok" and res["compile"], r["output_tail"][-3000:]
    assert res["compile_s"] > 10 * max(res["step_times_s"])


def test_todays_tensorflow_multi_worker_natively_and_in_every_runtime(tf2, tmp_path):
    """TensorFlow 2.21 (Keras 3): MultiWorkerMirroredStrategy at 1 and 2 ranks natively and
    in every runtime, ranks numbered by the launcher; its own collectives keep the
    workers' weights equal."""
    every = "native,docker,podman,singularity,charliecloud"
    recs = campaign("tf2-mpich", every, "tf-mwms", tmp_path / "run")
    check(recs, every, "tf-mwms")
    assert {r["result"]["framework_version"] for r in recs} == {"2.21.0"}
    assert {r["result"]["dist"] for r in recs} == {"multi_worker_mirrored"}
    assert all(r["result"]["weights_in_sync"] for r in recs)


# TensorBoard's own reader; tf.summary (TF2) files hold tensors, tensorboardX's scalars.
READ_EVENTS = """
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util import tensor_util
acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0, "tensors": 0}).Reload()
tags = acc.Tags()
if "accuracy" in tags["scalars"]:
    names, values = tags["scalars"], [s.value for s in acc.Scalars("accuracy")]
else:
    names = tags["tensors"]
    values = [float(tensor_util.make_ndarray(t.tensor_proto)) for t in acc.Tensors("accuracy")]
print(json.dumps({"tags": sorted(names), "accuracy": values}))
"""


@pytest.mark.parametrize(
    "image,script,ranks",
    [
        ("pytorch-mpich", "torch_cnn.py", 1),
        ("pytorch-mpich", "torch_cnn.py", 2),
        ("horovod-mpich", "tf_cnn.py", 2),
        ("caffe2-mpich", "caffe2_cnn.py", 2),
    ],
)
def test_accuracy_mode_learns_and_tensorboard_reads_it(
    built, horovod, caffe2, tmp_path, image, script, ranks
):
    """The learnable problem, trained 150 steps: loss and accuracy as TensorBoard events
    (read back by TensorBoard itself, from the Horovod image), final accuracy high."""
    from kit.image import recipes

    logs = tmp_path / "events"
    logs.mkdir()
    logs.chmod(0o777)
    run = in_image(
        recipes.load(image).tag("cpu"),
        *("mpirun", "-np", str(ranks), "python", f"/opt/kit/benchmarks/{script}"),
        *("--task", "accuracy", "--steps", "150", "--warmup", "0", "--logdir", "/events"),
        volume=f"{logs}:/events",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rec = readers.parse_result(run.stdout)  # other ranks may print after it
    assert rec is not None, run.stdout[-2000:]
    assert kitschema.validate(rec) == [] and rec["task"] == "accuracy"
    assert sum(rec["accuracy"][-10:]) / 10 > 0.8, rec["accuracy"]
    read = in_image(HOROVOD_TAG, "python", "-c", READ_EVENTS, "/events", volume=f"{logs}:/events")
    assert read.returncode == 0, read.stderr[-3000:]
    events = json.loads(read.stdout.strip().splitlines()[-1])
    assert events["tags"] == ["accuracy", "images_per_sec", "loss"]
    assert len(events["accuracy"]) == 150 and sum(events["accuracy"][-10:]) / 10 > 0.8


def test_a_batch_that_does_not_fit_is_an_oom_result(built, tmp_path):
    """resnet50 at batch 256 under a 2 GB data limit: recorded as oom, listed in the report."""
    out = tmp_path / "run"
    kit(
        *("run", "pytorch-mpich", "--runtime", "docker", "--model", "resnet50"),
        *("--batch-size", "256", "--np", "1", "--repeats", "1", "--warmup-trials", "0"),
        *("--steps", "1", "--warmup-steps", "0", "--out", str(out)),
        *("--runtime-arg", "docker:--ulimit=data=2000000000"),
    )
    (rec,) = records(out)
    assert rec["status"] == "oom", rec["output_tail"]
    assert rec["result"]["status"] == "oom" and kitschema.validate(rec["result"]) == []
    assert (
        "| pytorch-mpich | torch-cnn | resnet50 | 256 | 1 | docker | 1 |"
        in kit("report", str(out)).stdout
    )


MAPS = "import mpi4py.MPI; print(*[x for x in open('/proc/self/maps') if 'libmpich' in x])"


def test_bind_model_runs_on_the_host_mpi_library(built, tmp_path):
    """singularity-bind: ranks load the host's libmpich from the bind, not the image's."""
    out = tmp_path / "run"
    recs = campaign("pytorch-mpich", "singularity-bind", "mpi", out)
    check(recs, "singularity-bind", "mpi")
    argv = recs[-1]["argv"]
    sif = next(a for a in argv if a.endswith(".sif"))
    prefix = argv[argv.index("apptainer") : argv.index(sif) + 1]
    maps = subprocess.run(
        [*prefix, "/opt/kit/venv/bin/python", "-c", MAPS], capture_output=True, text=True
    )
    assert maps.returncode == 0, maps.stderr[-2000:]
    assert "/opt/kit/host-mpi/libmpich.so.12" in maps.stdout, maps.stdout


def test_a_preset_end_to_end_with_its_published_column(horovod, tmp_path):
    """kit run --preset osu2018-grpc: its leg (the gRPC and MPI sweeps in Docker), then
    the report with the published figures beside what was measured."""
    out = tmp_path / "osu"
    done = kit("run", "--preset", "osu2018-grpc", "--out", str(out), timeout=1800)
    assert done.stdout.splitlines()[-1] == f"report: {out / 'report.md'}"
    recs = records(out / "grpc-and-mpi")
    assert {(r["bench"], r["status"]) for r in recs} == {("grpc", "ok"), ("mpi", "ok")}
    text = (out / "report.md").read_text()
    assert text.startswith("# kit report: osu2018-grpc: ") and "\n\nPreset osu2018-grpc: " in text
    assert f" trials in {out / 'grpc-and-mpi'}: " in text
    assert "## Published beside measured" in text
    assert "| 2.14 times | Cluster A, InfiniBand EDR; gRPC 1.5.0 vs AR-gRPC |" in text
    assert "## gRPC: Echo from rank 0 to rank 1" in text
