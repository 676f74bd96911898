"""One trial: the benchmark's argv, and how its end is read."""

import os
import sys

import fingerprint

from kit import runtimes
from kit.analysis import fingerprints
from kit.core import command
from kit.image import recipes
from kit.launch import launchers
from kit.results import store
from kit.run import plan, trial


def test_program_argv_per_benchmark():
    args = {"torch-hvd": ["--precision=bf16"], "mpi": ["--time-per-size=0.05"]}
    opts = plan.Options(steps=10, warmup_steps=2, bench_args=args)
    real = plan.Config("torch-hvd", "resnet50", 16, 2, "real")
    assert trial.program("py", "/b", real, opts, "/mnt", "100.000000") == [
        "py", "/b/torch_cnn.py", "--dist", "horovod", "--model", "resnet50",
        "--batch-size", "16", "--steps", "10", "--warmup", "2", "--data", "real",
        "--data-dir", "/mnt", "--precision=bf16", "--launch-time", "100.000000",
    ]  # fmt: skip
    sweep = plan.Config("mpi", "-", 0, 2)
    assert trial.program("py", "/b", sweep, opts, "", "100.000000") == [
        "py", "/b/mpi_bench.py", "--time-per-size=0.05", "--launch-time", "100.000000",
    ]  # fmt: skip
    assert trial.program("py", "/b", sweep, plan.Options(), "", "100.000000") == [
        "py", "/b/mpi_bench.py", "--launch-time", "100.000000",
    ]  # fmt: skip


def test_out_of_memory_is_a_result_whoever_reports_it():
    def outcome(status, result=None, tail=""):
        return trial.outcomes.Outcome(status, 1, 1.0, result, tail)

    assert trial.status(outcome("failed", {"status": "oom"})) == "oom"
    tf_abort = "Allocator (mklcpu) ran out of memory trying to allocate 3.06GiB"
    assert trial.status(outcome("failed", None, tf_abort)) == "oom"
    slurm = "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=7.0."
    assert trial.status(outcome("failed", None, slurm)) == "oom"
    killed = trial.outcomes.Outcome("failed", 137, 1.0, None, "", oom_killed=True)
    assert trial.status(killed) == "oom"  # the kernel's OOM killer, counted by supervise.run
    assert trial.status(outcome("failed", None, "Segmentation fault")) == "failed"
    assert trial.status(outcome("timeout", None, "out of memory")) == "timeout"
    gone = "docker: Cannot connect to the Docker daemon at unix:///x.sock. Is it running?"
    lost = runtimes.get("docker").service_lost
    assert trial.status(outcome("failed", None, gone), lost) == "lost"  # --resume reruns it
    assert trial.status(outcome("failed", None, gone)) == "failed"
    assert "oom" in store.FINISHED


def test_a_commands_trial_record_carries_its_first_ranks_fingerprint(tmp_path):
    """A user's command (kit run --command) run natively as kit runs it (the Local launcher,
    a real process): its record's result holds the fingerprint read from the host while it
    ran, in the benchmarks' layout, which the report's comparison reads unchanged."""
    code = "import time; time.sleep(0.3); print('rate: 5', flush=True); time.sleep(1)"
    argv = (sys.executable, "-c", code)
    cmd = command.Command(
        "own", argv, argv, command.pattern(r"rate: (?P<rate>\S+)"), "", True, "last"
    )
    opts = plan.Options(0, 0, 60, "mpirun", {}, {"own": []}, command=cmd)
    env = {"PATH": os.environ["PATH"], "OMP_NUM_THREADS": "3"}
    ctx = trial.Context(
        recipes.load("pytorch-mpich"), "cpu", opts, "c1", "mpirun", "none",
        trial.host_info(), env, launchers.Local(), tmp_path,
    )  # fmt: skip
    prep = runtimes.Prepared("native", "sha256:n", sys.executable, "")
    planned = plan.Planned("native", plan.Config("own", "-", 0, 1, "-"), 0, False)
    filed = trial.run(ctx, runtimes.get("native"), prep, "1", planned, 0)
    assert filed.status == "ok" and filed.result["value"] == 5.0
    fp = filed.result["fingerprint"]
    assert fp["version"] == fingerprint.VERSION and fp["environment"] == {"OMP_NUM_THREADS": "3"}
    folder, _, name = os.path.realpath(sys.executable).rpartition("/")
    assert fp["libraries"][folder][name]  # the executable, its identity read through its root
    assert fp["limits"]["affinity"] and fp["threads"]["process"] >= 1
    assert fp["took_ms"] >= 0  # its cost is measured in docs/timings.md, not bounded here
    assert fingerprints.facts(fp)[("environment", "OMP_NUM_THREADS")][0] == "3"
