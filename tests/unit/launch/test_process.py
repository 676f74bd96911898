"""Trials leave nothing behind: real process trees, stopped on timeout and on Ctrl-C."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kit.core import benches, command, readers
from kit.launch import mounts, outcomes, proctree, streams, supervise

BENCHMARKS = str(Path(__file__).parents[3] / "benchmarks")
ME = os.getpid()  # in the markers: another test run's trials are never taken for this one's

# A launcher whose grandchild escapes the way squashfuse_ll does: a new session
# and an emptied environment, so only watching the tree can find it. It loads
# kitbench as a benchmark does, so it can tell where it hangs.
ESCAPER = r"""
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[3]); import kitbench
child = subprocess.Popen(["setsid", "env", "-i", sys.executable, "-c",
                          "import time; time.sleep(300)"])
open(sys.argv[2], "w").write(f"{os.getpid()} {child.pid}")
print('{"schema": "kit.bench/2", "images_per_sec": 1.0}', flush=True)
time.sleep(float(sys.argv[1]))
"""
# Before it ends, the escaper waits until the watch has seen its child (the test's spy on
# Tree.scan writes SEEN): how soon the watch looks is the machine's load, not kit's logic.
WAIT = "while not os.path.exists(sys.argv[4]): time.sleep(0.02)"


def alive(pids):
    return [p for p in pids if proctree._stat(p) is not None]


def gone_soon(pids: list[int], within_s: float = 30.0) -> list[int]:
    """Those of pids still running after waiting up to within_s: a process kit killed may
    wait a while, on a loaded host, to be scheduled, die and be reaped (by init, once
    orphaned); one kit left running (a 300 s sleep) is still there at the deadline."""
    deadline = time.monotonic() + within_s
    while (left := alive(pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def run_escaper(sleep_s, timeout, marker, tmp_path, monkeypatch):
    """Run the escaper as a rank 0 would be; every process it started must be gone after.
    It sleeps sleep_s only once the watch has seen its escaped child."""
    cleaned = []
    pids, seen = tmp_path / "pids", tmp_path / "seen"
    real_scan = proctree.Tree.scan

    def scan(tree: proctree.Tree) -> None:
        real_scan(tree)
        started = pids.read_text().split() if pids.exists() else []
        if len(started) == 2 and int(started[1]) in tree.seen:
            seen.touch()

    monkeypatch.setattr(proctree.Tree, "scan", scan)
    code = ESCAPER.replace(
        "time.sleep(float(sys.argv[1]))", f"{WAIT}\ntime.sleep(float(sys.argv[1]))"
    )
    out = supervise.run(
        [sys.executable, "-c", code, str(sleep_s), str(pids), BENCHMARKS, str(seen)],
        {**os.environ, "PMI_RANK": "0"},
        timeout,
        marker,
        lambda: cleaned.append(True),
    )
    started = [int(p) for p in pids.read_text().split()]
    assert gone_soon(started) == [], "a process the trial started is still running"
    return out, cleaned


def test_ok_trial_parses_record_and_reaps_escaped_child(tmp_path, monkeypatch):
    out, cleaned = run_escaper(1.0, 60, f"t-ok-{ME}", tmp_path, monkeypatch)
    assert out.status == "ok" and out.stuck == ()
    assert out.result == {"schema": "kit.bench/2", "images_per_sec": 1.0}
    assert cleaned == [True]


def test_the_stacks_are_waited_for_until_printed_not_for_a_fixed_time(tmp_path):
    """A stuck rank's stacks are asked for, and kit goes on once they are on stderr: a
    rank slow to print them (as on a loaded host) is waited for; a fast one is not."""
    ready = tmp_path / "ready"
    code = (
        "import faulthandler, signal, time\n"
        "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "time.sleep(300)\n"
    )
    with subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE) as p:
        err, stopped = streams.Capture(), threading.Event()
        pump = threading.Thread(target=streams.pump, args=(p.stderr, err, stopped), daemon=True)
        pump.start()
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        stuck = ({"pid": p.pid, "rank": 0, "command": "python -c"},)
        t0 = time.monotonic()
        supervise.ask_for_stacks(stuck, err)
        waited = time.monotonic() - t0
        p.kill()
        p.wait()
        stopped.set()
        pump.join()  # before the pipe is closed under it
    assert "most recent call first" in err.text()
    assert waited < supervise.STACK_WAIT_S  # it went on once they were there


def test_timeout_stops_whole_tree(tmp_path, capsys, monkeypatch):
    t0 = time.monotonic()
    tree_seen = []
    real_stop = supervise.stop

    def spy(proc, tree, marker):
        real_stop(proc, tree, marker)
        tree_seen.extend(tree.seen)

    supervise.stop = spy
    try:
        out, cleaned = run_escaper(300, 10, f"t-timeout-{ME}", tmp_path, monkeypatch)
    finally:
        supervise.stop = real_stop
    assert out.status == "timeout"
    # what was still running is named: the rank first (from the launcher's environment)
    assert out.stuck[0]["rank"] == 0 and "import os, subprocess" in out.stuck[0]["command"]
    assert "timed out after 10 s; still running: ranks 0; stopping it" in capsys.readouterr().err
    # ... and where it was: the rank's stack, printed on kit's signal (waiting or sleeping)
    assert re.search(
        r'most recent call first\):\n  File "<string>", line [89] in <module>', out.output_tail
    )
    # 10 s, the stacks' and the grace's 7; only waiting out the escaped 300 s sleeper fails
    assert time.monotonic() - t0 < 280
    assert tree_seen  # the escaped sleeper (setsid and env exec in place)
    assert gone_soon(tree_seen) == []
    assert cleaned == [True]


def test_interrupt_stops_whole_tree_and_reports_interrupted(tmp_path, monkeypatch):
    def ctrl_c_once_seen() -> None:
        """Not on a clock: Ctrl-C once the watch has seen the escaped child (the spy's file),
        as a slow first look would otherwise leave it unseen, hence running, by chance."""
        seen, deadline = tmp_path / "seen", time.monotonic() + 120
        while not seen.exists() and time.monotonic() < deadline and not over.is_set():
            time.sleep(0.05)
        if not over.is_set():  # a run that already ended must not Ctrl-C a later test
            os.kill(os.getpid(), signal.SIGINT)

    # A job a non-interactive shell starts in the background ignores SIGINT, and so would
    # this test process: Ctrl-C's own handler for the test's duration.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    over = threading.Event()
    threading.Thread(target=ctrl_c_once_seen, daemon=True).start()
    try:
        out, cleaned = run_escaper(300, 60, f"t-int-{ME}", tmp_path, monkeypatch)
    finally:
        over.set()
        signal.signal(signal.SIGINT, before)
    assert out.status == "interrupted"
    assert cleaned == [True]


def python(code: str, marker: str) -> outcomes.Outcome:
    """A trial whose command is this Python code."""
    return supervise.run([sys.executable, "-c", code], dict(os.environ), 30, marker, lambda: None)


def test_failed_trial_keeps_output_tail_and_all_it_printed():
    code = "import sys; print('said'); print('x\\n' * 50 + 'boom', file=sys.stderr); sys.exit(3)"
    out = python(code, f"t-fail-{ME}")
    assert (out.status, out.exit_code, out.result) == ("failed", 3, None)
    assert out.output_tail.endswith("x\nboom\nsaid") and out.cause == ""
    assert out.output == "== stderr ==\n" + "x\n" * 50 + "boom\n\n== stdout ==\nsaid\n"
    record = json.dumps({"schema": benches.SCHEMA, "images_per_sec": 1.0})
    ok = python(f"print({record!r})", f"t-fine-{ME}")
    assert (ok.status, ok.output) == ("ok", "")


def test_a_rank_that_left_mpi_finalize_after_its_record_ends_the_trial_well():
    """Both ranks spun in MPICH's MPI_Finalize, kitbench's watchdog let them leave, and
    MPICH's launcher killed the one still there (exit 9): the record was printed before
    all that, so the trial is ok. Without the watchdog's note, exit 9 is a failure."""
    record = json.dumps({"schema": benches.SCHEMA, "images_per_sec": 1.0})
    note = f"{outcomes.LEFT_UNFINALIZED} in 30 s after the final barrier; leaving without it"
    code = f"import sys; print({record!r}); print({note!r}, file=sys.stderr); sys.exit(9)"
    left = python(code, f"t-left-{ME}")
    assert (left.status, left.exit_code, left.cause) == ("ok", 9, "")
    bare = python(f"import sys; print({record!r}); sys.exit(9)", f"t-nine-{ME}")
    assert (bare.status, bare.exit_code) == ("failed", 9)
    assert (
        outcomes.LEFT_UNFINALIZED
        in (Path(__file__).parents[3] / "benchmarks" / "kitbench.py").read_text()
    )


def test_a_rank_killed_by_a_signal_is_filed_with_the_signal():
    """A rank the OOM killer (or anyone) kills is not a generic failure: the record says
    which signal, whether kit's child died of it, a launcher reported it, or an engine
    exited 128+N."""
    out = python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", f"t-killed-{ME}")
    assert (out.status, out.exit_code) == ("failed", -9)
    assert (
        out.cause
        == "a rank was killed by SIGKILL (the kernel's OOM killer sends it, as does kill -9)"
    )
    hydra = "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   KILLED BY SIGNAL: 15"
    assert outcomes.cause(143, hydra) == "a rank was killed by SIGTERM"
    assert outcomes.cause(137, "") == outcomes.cause(-9, "") == out.cause  # docker run: 128+9
    hydra4 = "=   EXIT CODE: 9\nYOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)"
    assert outcomes.cause(9, hydra4) == out.cause  # MPICH 4's mpirun exits with the signal
    assert outcomes.cause(1, "mpirun noticed that process rank 1 exited on signal 11") == (
        "a rank was killed by SIGSEGV"
    )
    assert outcomes.cause(2, "usage: ...") == outcomes.cause(None, "") == ""
    assert outcomes.cause(137, "", oom_kills=2) == (
        "a rank was killed by the kernel's OOM killer (SIGKILL; 2 OOM kills on this host "
        "during the trial)"
    )
    assert outcomes.cause(143, hydra, oom_kills=1) == "a rank was killed by SIGTERM"
    assert not out.oom_killed and isinstance(outcomes.oom_kills(), int)


def test_parse_result_takes_last_bench_record():
    text = (
        'noise\n{"schema": "kit.bench/2", "a": 1}\n{"other": 2}\n'
        '{"schema": "kit.bench/2", "a": 2}\n'
    )
    assert readers.parse_result(text) == {"schema": "kit.bench/2", "a": 2}
    assert readers.parse_result("{not json\n") is None


# The launcher starts a mount daemon through a parent that exits 4 s later (as an
# Apptainer that died before stopping its squashfuse_ll; the watch, looking every 0.25 s,
# must see the parent alive at least once even on a loaded host), then waits for it, as
# mpirun waits for the pipes such a daemon holds. Without kit stopping it: the timeout.
ORPHAN = r"""
( "$1" 300 & echo $! > "$2"; sleep 4 )
while [ -d /proc/$(cat "$2") ] && ! grep -q '^State:.*Z' /proc/$(cat "$2")/status; do
  sleep 0.2
done
"""


def test_a_mount_daemon_left_by_a_dead_apptainer_is_stopped(tmp_path):
    daemon = tmp_path / "squashfuse_ll"
    daemon.symlink_to("/bin/sleep")  # its name (comm) is the link's
    t0 = time.monotonic()
    out = supervise.run(
        ["sh", "-c", ORPHAN, "sh", str(daemon), str(tmp_path / "pid")],
        dict(os.environ),
        60,
        f"kit-test-orphan-{ME}",
        lambda: None,
    )
    assert out.exit_code == 0, out.status  # ended by kit, not by the 60 s timeout
    # not before its grace (load only adds); no upper bound: the exit code above already
    # tells kit's stop from the timeout's, whatever the load
    assert time.monotonic() - t0 >= 4 + mounts.ORPHAN_GRACE_S


def test_a_mount_daemon_whose_apptainer_lives_is_left_alone(tmp_path):
    daemon = tmp_path / "squashfuse_ll"
    daemon.symlink_to("/bin/sleep")
    argv = ["sh", "-c", '"$1" 6; true', "sh", str(daemon)]  # its parent waits for it
    out = supervise.run(argv, dict(os.environ), 60, f"kit-test-kept-{ME}", lambda: None)
    assert out.exit_code == 0 and out.wall_s >= 6


def figure(metric: str = r"rate: (?P<rate>\S+)"):
    """What makes a reader of a user's command's figure, as kit run --metric does."""
    return command.Command("cmd", ("x",), (), command.pattern(metric), "", True, "last").reader


def echo(text: str, read=None) -> outcomes.Outcome:
    """A trial whose command prints one line and exits 0."""
    return supervise.run(["echo", text], dict(os.environ), 30, f"t-echo-{ME}", lambda: None, read)


MUST = "a figure must be finite and above 0"


@pytest.mark.parametrize(
    ("printed", "why"),
    [
        ("rate: 0", f"metric 'rate' read 0: {MUST}"),
        ("rate: -2.5", f"metric 'rate' read -2.5: {MUST}"),
        ("rate: nan", "--metric group 'rate' matched 'nan', not a finite number"),
        ("rate: inf", "--metric group 'rate' matched 'inf', not a finite number"),
        ("rate: 1e999", "--metric group 'rate' matched '1e999', not a finite number"),
    ],
)
def test_a_commands_figure_not_finite_and_above_0_fails_the_trial_naming_it(printed, why):
    out = echo(printed, figure())
    assert (out.status, out.exit_code, out.result, out.cause) == ("failed", 0, None, why)
    assert echo("rate: 5", figure()).result["value"] == 5.0


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ('"bench": "torch-cnn", "images_per_sec": 0', f"metric 'images_per_sec' read 0: {MUST}"),
        ('"bench": "tf-cnn", "images_per_sec": -1.5', f"metric 'images_per_sec' read -1.5: {MUST}"),
        (
            '"bench": "torch-cnn", "images_per_sec": NaN',
            f"metric 'images_per_sec' read nan: {MUST}",
        ),
        ('"images_per_sec": Infinity', f"metric 'images_per_sec' read inf: {MUST}"),
        ('"images_per_sec": 1e999', f"metric 'images_per_sec' read inf: {MUST}"),
        ('"bench": "torch-cnn"', f"metric 'images_per_sec' read nothing: {MUST}"),
        (
            '"bench": "mpi", "allreduce": [{"bytes": 4, "latency_us": 0}]',
            f"metric 'allreduce latency_us' read 0: {MUST}",
        ),
    ],
)
def test_a_kit_records_figure_not_finite_and_above_0_fails_the_trial_naming_it(fields, why):
    """The benchmark's own record is checked where it is read, as a command's figure is:
    Python's json writes and reads NaN and Infinity, and reads 1e999 as infinity."""
    out = echo(f'{{"schema": "{benches.SCHEMA}", {fields}}}')
    assert (out.status, out.result, out.cause) == ("failed", None, why)


def test_an_out_of_memory_record_has_no_figure_and_is_no_failure_of_reading():
    oom = f'{{"schema": "{benches.SCHEMA}", "bench": "torch-cnn", "status": "oom", '
    out = echo(oom + '"images_per_sec": null}')
    assert out.status == "ok" and out.result["status"] == "oom"  # trial.status files it oom


def test_an_optional_group_that_took_no_part_is_no_figure():
    out = echo("no number here", figure(r"(?P<rate>[0-9]+)?"))
    assert (out.status, out.result) == ("failed", None)
    assert (
        out.cause
        == "--metric '(?P<rate>[0-9]+)?' matched, but its group 'rate' took no part: no figure"
    )
    assert echo("rate 7", figure(r"(?P<rate>[0-9]+)?")).result["value"] == 7.0


def test_endless_output_is_read_as_it_streams_and_kept_bounded(monkeypatch):
    """`yes rate: 1` for the whole timeout: a timeout (a command that never ended gives no
    trial's figure), with only the tail of what it printed kept, headed by what was cut."""
    monkeypatch.setattr(streams, "TAIL_BYTES", 4096)
    out = supervise.run(
        ["yes", "rate: 1"], dict(os.environ), 1, f"t-yes-{ME}", lambda: None, figure()
    )
    assert (out.status, out.result) == ("timeout", None)
    head, _, stdout = out.output.partition("\n== stdout ==\n")
    assert head == "== stderr ==\n"
    cut, _, kept = stdout.partition(" bytes cut …\n")
    assert cut.startswith("… ") and int(cut[2:]) > 0 and 0 < len(kept) <= 4096
    assert set(kept.split("\n")) <= {"rate: 1", "rate: ", "rate:", "rate", "rat", "ra", "r", ""}
    assert len(out.output_tail) <= outcomes.TAIL_CHARS


def test_the_result_is_read_from_all_the_output_the_log_keeps_its_end(monkeypatch):
    """The record printed first is read though it is long cut from the kept tail; a failed
    trial's log holds the last TAIL_BYTES of each stream, saying how many bytes came before."""
    monkeypatch.setattr(streams, "TAIL_BYTES", 1000)
    record = json.dumps({"schema": benches.SCHEMA, "images_per_sec": 2.0})
    ok = python(f"print({record!r}); print('x' * 5000)", f"t-long-ok-{ME}")
    assert ok.status == "ok" and ok.result["images_per_sec"] == 2.0
    code = "import sys; sys.stdout.write('x' * 5000 + '\\nlast\\n'); sys.exit(4)"
    failed = python(code, f"t-long-failed-{ME}")
    assert failed.status == "failed"
    tail = "x" * 994 + "\nlast\n"
    assert failed.output == f"== stderr ==\n\n== stdout ==\n… 4006 bytes cut …\n{tail}"


class Lines:
    """A reader that keeps the lines it is given."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def line(self, text: str) -> None:
        self.seen.append(text)

    def result(self) -> None:
        return None


def test_lines_are_whole_however_the_output_arrives(monkeypatch):
    """A line split over reads is one line; \\r\\n and \\r end lines as Python reads text; a
    line longer than LINE_BYTES is skipped whole (never read as a shorter one); bytes that
    are not UTF-8 are replaced; the last line counts without its newline."""
    monkeypatch.setattr(streams, "LINE_BYTES", 8)
    data = b"a\r\nbb\rcc\n" + b"z" * 20 + b"\n\xffok\nlast"
    for size in (1, 2, 3, 7, len(data)):
        reader = Lines()
        capture = streams.Capture(reader)
        for i in range(0, len(data), size):
            capture.take(data[i : i + size])
        capture.end()
        assert reader.seen == ["a", "bb", "cc", "\ufffdok", "last"], size
        assert capture.text() == data.decode(errors="replace")


def test_a_pipe_held_open_outside_the_tree_does_not_hold_up_the_trial(tmp_path):
    """A process that left the tree and the marker behind (a new session, an emptied
    environment, its parent gone) keeps the trial's output pipes open: the trial still
    ends with its launcher, its output read up to then."""
    pid = tmp_path / "pid"
    escape = f"( env -i setsid sleep 60 & echo $! > {pid} ); echo rate: 3"
    try:
        out = supervise.run(
            ["sh", "-c", escape], dict(os.environ), 30, f"t-held-{ME}", lambda: None, figure()
        )
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid.read_text()), signal.SIGKILL)
    # ok, not its 30 s timeout: it did not wait for the 60 s the sleeper holds the pipes
    assert (out.status, out.result["value"]) == ("ok", 3.0)
