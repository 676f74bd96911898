"""One trial: the benchmark's argv, and how its end is read."""

from kit import runtimes
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
