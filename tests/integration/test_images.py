"""The framework images: a full Horovod build, its check and a 2-rank allreduce in it."""

from pathlib import Path

import pytest

from kit.core import readers

from .conftest import CAFFE2_TAG, HOROVOD_TAG, apptainer, in_image

pytestmark = pytest.mark.integration


# One framework per process, as in real jobs: two Horovod instances (TF's and PyTorch's)
# in one process call MPI from two background threads, which MPICH's UCX layer does not
# allow without MPI_THREAD_MULTIPLE (it aborted once in a few runs here).
ALLREDUCE = {
    "torch": "import horovod.torch as hvd, torch; hvd.init(); "
    "x = float(hvd.allreduce(torch.tensor([hvd.rank() + 1.0]), op=hvd.Sum)[0])",
    "tensorflow": "import horovod.tensorflow as hvd, tensorflow as tf; hvd.init(); "
    "x = float(hvd.allreduce(tf.constant([hvd.rank() + 1.0]), op=hvd.Sum)[0])",
}
REPORT = "; print('RESULT', hvd.rank(), hvd.size(), hvd.mpi_enabled(), x)"


def test_horovod_check_build_lists_both_frameworks_and_mpi(horovod):
    p = in_image(HOROVOD_TAG, "horovodrun", "--check-build")
    assert p.returncode == 0, p.stderr
    for line in ("[X] TensorFlow", "[X] PyTorch", "[X] MPI", "[X] Gloo"):
        assert line in p.stdout, p.stdout


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_horovod_two_rank_allreduce_under_mpirun(horovod, framework):
    program = ALLREDUCE[framework] + REPORT
    p = in_image(HOROVOD_TAG, "mpirun", "-np", "2", "python", "-c", program)
    assert p.returncode == 0, p.stderr[-3000:]
    results = sorted(
        line.split()[1:] for line in p.stdout.splitlines() if line.startswith("RESULT")
    )
    assert results == [["0", "2", "True", "3.0"], ["1", "2", "True", "3.0"]]


# Rank 1 passes the barrier finalize() starts with, then never finalizes: rank 0's
# MPI_Finalize waits for it in MPICH's PMI barrier, as both ranks did in a hung trial.
STUCK_IN_FINALIZE = """
import os, sys, time
sys.path.insert(0, "/opt/kit/benchmarks")
import kitbench
kitbench.mpi_library()
comm = kitbench.mpi_comm()
kitbench.FINALIZE_WAIT_S = 2
if comm.Get_rank() == 1:
    comm.Barrier()
    time.sleep(60)
    os._exit(0)
kitbench.finalize()
"""


def test_a_rank_stuck_in_mpi_finalize_leaves_after_the_watchdog(horovod):
    """mpi4py's Finalize holds the GIL, so a watchdog thread never ran while a rank
    hung there (a trial waited for its timeout); kitbench calls it without the GIL."""
    p = in_image(HOROVOD_TAG, "mpirun", "-np", "2", "python", "-c", STUCK_IN_FINALIZE)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "MPI_Finalize did not return in 2 s" in p.stderr


def test_builder_stage_leaves_its_wheels_and_nothing_else(horovod):
    apt = dict(p.split("=", 1) for p in horovod["apt"])
    pip = dict(p.split("==", 1) for p in horovod["pip"])
    assert pip["horovod"] == "0.28.1" and pip["tensorflow-cpu"] == "2.12.1"
    assert apt["python3-torch"] == "1.13.1+dfsg-4" and apt["mpich"] == "4.0.2-3+b1"
    # (g++ itself stays: MPI's development package, the mpicc wrappers, needs it; and
    # python3-dev and gcc come with the PyTorch layer the image shares with pytorch-mpich)
    assert "python3-dev" in apt and "gcc" in apt
    for builder_only in ("cmake", "libtorch-dev", "pybind11-dev"):
        assert builder_only not in apt, f"{builder_only} leaked from the builder stage"
    assert horovod["labels"]["kit.mpi.flavour"] == "mpich"
    # what the builder made is kept, so the native environment can install the same binaries
    wheels = in_image(HOROVOD_TAG, "ls", "/opt/kit/wheels").stdout.split()
    assert [w.split("-")[:2] for w in wheels] == [["horovod", "0.28.1"], ["mpi4py", "3.1.4"]]
    # built without debug information: 1.9 MB and 0.6 MB here (with -g: 35.5 MB, 2.9 MB)
    sizes = in_image(HOROVOD_TAG, "stat", "-c", "%s", *(f"/opt/kit/wheels/{w}" for w in wheels))
    assert all(int(n) < 5e6 for n in sizes.stdout.split()), sizes.stdout


READ_EVENTS = """
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1]).Reload()
print("TAGS", sorted(acc.Tags()["scalars"]), "GRAPH", acc.Tags()["graph"])
print("LOSS", len(acc.Scalars("loss")), acc.Scalars("loss")[-1].value)
"""


def test_caffe2_two_ranks_train_and_tensorboard_reads_the_events(caffe2, tmp_path):
    logs = tmp_path / "events"
    logs.mkdir()
    run = in_image(
        CAFFE2_TAG,
        *("mpirun", "-np", "2", "python", "/opt/kit/benchmarks/caffe2_cnn.py"),
        *("--steps", "8", "--warmup", "2", "--logdir", "/events"),
        volume=f"{logs}:/events",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rec = readers.parse_result(run.stdout)  # other ranks may print after it
    assert rec is not None, run.stdout[-2000:]
    assert (rec["bench"], rec["ranks"], rec["framework"]) == ("caffe2-cnn", 2, "caffe2")
    assert rec["mpi_library"].startswith("MPICH") and len(rec["loss"]) == 8
    read = in_image(CAFFE2_TAG, "python", "-c", READ_EVENTS, "/events", volume=f"{logs}:/events")
    assert read.returncode == 0, read.stderr[-3000:]
    assert "TAGS ['accuracy', 'images_per_sec', 'loss'] GRAPH True" in read.stdout
    assert "LOSS 10 " in read.stdout  # every step, warm-up included


@pytest.mark.all_images
def test_definition_builds_with_apptainer_alone(definition):
    """pytorch-mpich's definition becomes a SIF through Apptainer only, as an ordinary
    user: the local base as a SIF (from its archive), then the definition; no engine
    takes part in the build itself (conftest.build_definition, run beside the images; a
    run with the same inputs reuses that SIF, as the engine reuses its layers)."""
    sif = definition
    assert isinstance(sif, Path), sif

    def run(*args: str) -> str:
        p = apptainer(*args, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        return p.stdout

    probe = (
        "import torch; from mpi4py import MPI; print(torch.__version__, MPI.Get_library_version())"
    )
    out = run("exec", str(sif), "python", "-c", probe)
    assert out.startswith("1.13") and "MPICH Version:" in out  # Debian: 1.13.0a0
    pip = run("exec", str(sif), "cat", "/opt/kit/pip-packages.txt").split()
    assert "mpi4py==3.1.4" in pip
    labels = run("inspect", "--labels", str(sif))
    assert "kit.mpi.flavour: mpich" in labels
