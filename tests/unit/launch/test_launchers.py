"""torchrun as the launcher: one launch whose program is torchrun, which starts the ranks."""

import pytest

from kit import runtimes
from kit.launch import launchers, supervise
from kit.runtimes import Job, Prepared


class Started(Exception):
    """Raised in place of starting anything: carries the argv kit would run."""


@pytest.mark.parametrize("arm", ["native", "docker", "singularity"])
def test_torchrun_is_one_launch_that_starts_every_rank(monkeypatch, arm):
    def start(argv, *args):
        raise Started(argv)

    monkeypatch.setattr(supervise, "run", start)
    rt = runtimes.get(arm)
    prep = Prepared("kit/pytorch2-mpich:2.0.0-cpu", "sha256:1", "/py", "/b")
    job = Job(["/py", "/b/torch_cnn.py", "--model", "tiny"], 2, "mpirun.mpich", "kit-t1")
    with pytest.raises(Started) as started:
        launchers.Torchrun().run(rt, prep, job, {}, 60, "t")
    argv = started.value.args[0]
    torchrun = ["/py", "-m", "torch.distributed.run", "--standalone", "--nnodes=1"]
    program = [*torchrun, "--nproc-per-node=2", "/b/torch_cnn.py", "--model", "tiny"]
    assert argv[-len(program) :] == program  # the runtime's own prefix, then torchrun
    assert "mpirun.mpich" not in argv and "mpirun" not in argv
    assert launchers.Torchrun().label(rt, 2) == "torchrun"
