"""A trial's own CPU, counted by its process watch for every runtime (real processes,
synchronised by files, never by the clock), and what the host's load record makes of it."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kit.launch import hostload, proctree, supervise

BURN = "import time\nwhile time.process_time() < 0.6: pass\n"  # 0.6 s of CPU, however slow
PY = sys.executable
ME = os.getpid()  # in the markers: another test run's processes never carry this one's


def touch_then_sleep(path: Path) -> str:
    return f"open({str(path)!r}, 'w').close()\ntime.sleep(300)\n"


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + 120  # only a hung child ever reaches it
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


@pytest.fixture
def spawn():
    """Start Python code (or argv) as a process of its own; every one is ended after."""
    started: list[subprocess.Popen] = []

    def start(code: str | list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        argv = code if isinstance(code, list) else [PY, "-c", code]
        started.append(subprocess.Popen(argv, env=env))
        return started[-1]

    yield start
    for p in started:
        p.kill()
        p.wait()


def total_s(pid: int) -> float:
    st = proctree._read(pid)
    assert st is not None
    return (st.cpu + st.reaped) / hostload.TICK


def test_the_trees_cpu_is_the_trials_own(spawn, tmp_path):
    burned = tmp_path / "burned"
    root = spawn(BURN + touch_then_sleep(burned))
    tree = proctree.Tree(root.pid)
    wait_for(burned)
    tree.scan()
    assert tree.window.own_s >= 0.5
    assert tree.window.seconds > 0


CHILD = (
    BURN
    + """
import pathlib, sys
pathlib.Path(sys.argv[1]).touch()
while not pathlib.Path(sys.argv[2]).exists():
    time.sleep(0.02)
"""
)


def parent_of_child(*files: Path) -> str:
    """A root that runs CHILD (it burns, says so, waits for a go) and waits for it."""
    burned, go, reaped = (str(f) for f in files)
    return f"""
import pathlib, subprocess, sys, time
subprocess.run([sys.executable, "-c", {CHILD!r}, {burned!r}, {go!r}])
{touch_then_sleep(Path(reaped))}"""


def test_a_child_waited_for_is_counted_in_its_parent_once(spawn, tmp_path):
    burned, go, reaped = tmp_path / "burned", tmp_path / "go", tmp_path / "reaped"
    root = spawn(parent_of_child(burned, go, reaped))
    tree = proctree.Tree(root.pid)
    wait_for(burned)
    tree.scan()  # sees the child, 0.6 s of CPU in its own counters
    assert len(tree.seen) == 1 and tree.window.own_s >= 0.5
    go.touch()
    wait_for(reaped)
    tree.scan()  # the child is gone: its time is in the root's cutime now, counted once
    assert tree.window.own_s == pytest.approx(total_s(root.pid), abs=0.015)
    assert 0.5 <= tree.window.own_s < 1.1  # twice would be 1.2 at least


def test_a_child_never_seen_is_counted_through_its_parent(spawn, tmp_path):
    burned, go, reaped = tmp_path / "burned", tmp_path / "go", tmp_path / "reaped"
    go.touch()
    root = spawn(parent_of_child(burned, go, reaped))
    tree = proctree.Tree(root.pid)
    wait_for(reaped)
    tree.scan()  # the first look: the child came and went before it
    assert tree.seen == {} and tree.window.own_s >= 0.5


def test_a_stretch_in_which_a_process_ended_unwatched_is_left_out(spawn, tmp_path):
    """The root ends, waited for by kit: what it used after the last look is lost to the
    count, so that stretch counts neither for the trial nor for the machine."""
    burned, go = tmp_path / "burned", tmp_path / "go"
    root = spawn([PY, "-c", CHILD, str(burned), str(go)])
    tree = proctree.Tree(root.pid)
    wait_for(burned)
    tree.scan()
    counted = tree.window
    assert counted.own_s >= 0.5
    go.touch()
    root.wait()
    tree.scan()
    assert tree.window == counted


def test_a_child_whose_parent_ignores_sigchld_leaves_its_stretch_out(spawn, tmp_path):
    """Such a child's time reaches no one's cutime: counting the stretch would take its
    0.6 s from the trial's own and give it to 'other'."""
    burned, go, ended = tmp_path / "burned", tmp_path / "go", tmp_path / "ended"
    root = spawn(f"""
import os, signal, sys, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
pid = os.posix_spawn(sys.executable, [sys.executable, "-c", {CHILD!r}, {str(burned)!r},
                     {str(go)!r}], os.environ)
while os.path.exists(f"/proc/{{pid}}"):
    time.sleep(0.02)
{touch_then_sleep(ended)}""")
    tree = proctree.Tree(root.pid)
    wait_for(burned)
    tree.scan()
    counted = tree.window
    assert len(tree.seen) == 1 and counted.own_s >= 0.5
    go.touch()
    wait_for(ended)
    tree.scan()
    assert tree.window == counted


def test_a_marked_process_outside_the_tree_is_the_trials_own(spawn, tmp_path):
    """A container's ranks run under the engine, not under kit, with the trial's marker in
    their environment: they are counted; a busy neighbour without it is not."""
    marker, mine, theirs = f"kit-test-cpu-1-{ME}", tmp_path / "mine", tmp_path / "theirs"
    root = spawn("import time; time.sleep(300)")
    ranks = spawn(BURN + touch_then_sleep(mine), env={"KIT_TRIAL": marker})
    neighbour = spawn(BURN + touch_then_sleep(theirs), env={"KIT_TRIAL": f"kit-test-other-{ME}"})
    tree = proctree.Tree(root.pid, marker=marker)
    wait_for(mine)
    wait_for(theirs)
    tree.scan()
    pids = {pid for pid, _ in tree.marked}
    assert ranks.pid in pids and neighbour.pid not in pids
    assert 0.5 <= tree.window.own_s < 1.1  # with the neighbour's it would be 1.2 at least


def test_a_process_that_execs_into_the_trial_is_checked_again(spawn, tmp_path):
    """runc's init becomes the container's init by an exec, in the same process: a process
    first seen without the marker is looked at again once its name changes."""
    marker, go, burned = f"kit-test-cpu-2-{ME}", tmp_path / "go", tmp_path / "burned"
    code = BURN + touch_then_sleep(burned)
    wait = f"while [ ! -e {go} ]; do sleep 0.02; done"
    root = spawn("import time; time.sleep(300)")
    later = spawn(["sh", "-c", f'{wait}; exec env KIT_TRIAL={marker} "$0" -c "$1"', PY, code])
    tree = proctree.Tree(root.pid, marker=marker)
    tree.scan()
    assert any(pid == later.pid and name == "sh" for pid, _, name in tree.unmarked)
    go.touch()
    wait_for(burned)
    tree.scan()
    assert later.pid in {pid for pid, _ in tree.marked}
    assert tree.window.own_s >= 0.5


def test_each_process_environment_is_read_once(spawn, monkeypatch):
    """The watch runs beside the measurement: a process already found without the marker
    is not read again while its pid, start time and name stay the same."""
    root = spawn("import time; time.sleep(300)")
    tree = proctree.Tree(root.pid, marker=f"kit-test-cpu-3-{ME}")
    tree.scan()
    before = set(tree.unmarked)
    assert before
    again: Counter[int] = Counter()
    real = proctree._carries

    def counting(pid: int, marker: str) -> bool:
        st = proctree._read(pid)
        if st and (pid, st.start, st.name) in before:
            again[pid] += 1
        return real(pid, marker)

    monkeypatch.setattr(proctree, "_carries", counting)
    tree.scan()
    assert not again


def test_a_trial_outcome_carries_its_watch():
    out = supervise.run(
        [PY, "-c", "pass"], dict(os.environ), 30, f"kit-test-cpu-4-{ME}", lambda: None
    )
    assert isinstance(out.window, hostload.Window)


HELPER = f"kithelper{ME % 100000}"  # a name as /proc/PID/stat gives it: 15 characters at most


def helper(named: Path, go: Path, burned: Path) -> str:
    """Code that takes the runtime helper's name, says so, waits for a go, then burns 0.6 s
    of CPU and says so."""
    return f"""
import pathlib, time
open("/proc/self/comm", "w").write({HELPER!r})
pathlib.Path({str(named)!r}).touch()
while not pathlib.Path({str(go)!r}).exists():
    time.sleep(0.02)
t0 = time.process_time()
while time.process_time() - t0 < 0.6:
    pass
{touch_then_sleep(burned)}"""


def test_a_runtime_helper_outside_the_tree_is_counted_apart(spawn, tmp_path):
    """A runtime's helper (an engine's shim, conmon, a FUSE daemon) works for the trial
    outside its tree and without its marker: its CPU from the watch's start is the
    helper's share, neither the trial's own nor (hostload.during) outside load; a busy
    neighbour of another name is neither."""
    named, go, burned, theirs = (tmp_path / n for n in ("named", "go", "burned", "theirs"))
    root = spawn("import time; time.sleep(300)")
    spawn(helper(named, go, burned))
    wait_for(named)
    tree = proctree.Tree(root.pid, helpers=(HELPER,))
    go.touch()
    spawn(BURN + touch_then_sleep(theirs))
    wait_for(burned)
    wait_for(theirs)
    tree.scan()
    assert 0.5 <= tree.window.helper_s < 1.1  # with the neighbour's it would be 1.1 at least
    assert tree.window.own_s < 0.5


def test_a_helper_in_the_tree_counts_as_the_helpers_not_the_trials(spawn, tmp_path):
    """Apptainer's squashfuse runs under the trial's launcher: in the tree, it is still
    the runtime's helper, counted apart from the benchmark's CPU."""
    named, go, burned = tmp_path / "named", tmp_path / "go", tmp_path / "burned"
    go.touch()
    child = helper(named, go, burned)
    root = spawn(f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', "
                 f"{child!r}])\ntime.sleep(300)\n")  # fmt: skip
    tree = proctree.Tree(root.pid, helpers=(HELPER,))
    wait_for(burned)
    tree.scan()
    for pid in tree.seen:  # the helper outlives its parent
        os.kill(pid, signal.SIGKILL)
    assert len(tree.seen) == 1 and tree.window.helper_s >= 0.5
    assert tree.window.own_s < 0.5


def test_what_a_helper_waits_for_is_not_the_helpers(spawn, tmp_path):
    """An engine waits for other users' work too (a build's steps under dockerd): the
    CPU of the children a helper reaped is not counted as the runtime's."""
    named, go, burned = tmp_path / "named", tmp_path / "go", tmp_path / "burned"
    root = spawn("import time; time.sleep(300)")
    waits = f"""
import pathlib, subprocess, sys, time
open("/proc/self/comm", "w").write({HELPER!r})
pathlib.Path({str(named)!r}).touch()
while not pathlib.Path({str(go)!r}).exists():
    time.sleep(0.02)
subprocess.run([sys.executable, "-c", {BURN!r}])
{touch_then_sleep(burned)}"""
    spawn(waits)
    wait_for(named)
    tree = proctree.Tree(root.pid, helpers=(HELPER,))
    go.touch()
    wait_for(burned)
    tree.scan()
    assert tree.window.helper_s < 0.3  # with its child's it would be 0.6 at least
