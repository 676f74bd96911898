"""Trials leave nothing behind: real process trees, stopped on timeout and on Ctrl-C."""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from kit.core import benches
from kit.launch import process

BENCHMARKS = str(Path(__file__).parents[3] / "benchmarks")

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


def alive(pids):
    return [p for p in pids if process._stat(p) is not None]


def run_escaper(sleep_s, timeout, marker, tmp_path):
    """Run the escaper as a rank 0 would be; every process it started must be gone after."""
    cleaned = []
    pids = tmp_path / "pids"
    out = process.run(
        [sys.executable, "-c", ESCAPER, str(sleep_s), str(pids), BENCHMARKS],
        {**os.environ, "PMI_RANK": "0"},
        timeout,
        marker,
        lambda: cleaned.append(True),
    )
    started = [int(p) for p in pids.read_text().split()]
    time.sleep(0.3)
    assert alive(started) == [], "a process the trial started is still running"
    return out, cleaned


def test_ok_trial_parses_record_and_reaps_escaped_child(tmp_path):
    out, cleaned = run_escaper(1.0, 30, "t-ok", tmp_path)
    assert out.status == "ok" and out.stuck == ()
    assert out.result == {"schema": "kit.bench/2", "images_per_sec": 1.0}
    assert cleaned == [True]


def test_timeout_stops_whole_tree(tmp_path, capsys):
    t0 = time.monotonic()
    tree_seen = []
    real_stop = process.stop

    def spy(proc, tree, marker):
        real_stop(proc, tree, marker)
        tree_seen.extend(tree.seen)

    process.stop = spy
    try:
        out, cleaned = run_escaper(300, 2, "t-timeout", tmp_path)
    finally:
        process.stop = real_stop
    assert out.status == "timeout"
    # what was still running is named: the rank first (from the launcher's environment)
    assert out.stuck[0]["rank"] == 0 and "import os, subprocess" in out.stuck[0]["command"]
    assert "timed out after 2 s; still running: ranks 0; stopping it" in capsys.readouterr().err
    # ... and where it was: the rank's stack, printed on kit's signal
    assert 'most recent call first):\n  File "<string>", line 8 in <module>' in out.output_tail
    assert time.monotonic() - t0 < 15
    assert tree_seen  # the escaped sleeper (setsid and env exec in place)
    assert alive(tree_seen) == []
    assert cleaned == [True]


def test_interrupt_stops_whole_tree_and_reports_interrupted(tmp_path):
    def ctrl_c_once_started() -> None:  # not on a fixed clock: a slow start must not race it
        pids, deadline = tmp_path / "pids", time.monotonic() + 60
        while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGINT)

    # A job a non-interactive shell starts in the background ignores SIGINT, and so would
    # this test process: Ctrl-C's own handler for the test's duration.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=ctrl_c_once_started, daemon=True).start()
    try:
        out, cleaned = run_escaper(300, 60, "t-int", tmp_path)
    finally:
        signal.signal(signal.SIGINT, before)
    assert out.status == "interrupted"
    assert cleaned == [True]


def python(code: str, marker: str) -> process.Outcome:
    """A trial whose command is this Python code."""
    return process.run([sys.executable, "-c", code], dict(os.environ), 30, marker, lambda: None)


def test_failed_trial_keeps_output_tail_and_all_it_printed():
    code = "import sys; print('said'); print('x\\n' * 50 + 'boom', file=sys.stderr); sys.exit(3)"
    out = python(code, "t-fail")
    assert (out.status, out.exit_code, out.result) == ("failed", 3, None)
    assert out.output_tail.endswith("x\nboom\nsaid") and out.cause == ""
    assert out.output == "== stderr ==\n" + "x\n" * 50 + "boom\n\n== stdout ==\nsaid\n"
    record = json.dumps({"schema": benches.SCHEMA})
    ok = python(f"print({record!r})", "t-fine")
    assert (ok.status, ok.output) == ("ok", "")


def test_a_rank_killed_by_a_signal_is_filed_with_the_signal():
    """A rank the OOM killer (or anyone) kills is not a generic failure: the record says
    which signal, whether kit's child died of it, a launcher reported it, or an engine
    exited 128+N."""
    out = python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "t-killed")
    assert (out.status, out.exit_code) == ("failed", -9)
    assert (
        out.cause
        == "a rank was killed by SIGKILL (the kernel's OOM killer sends it, as does kill -9)"
    )
    hydra = "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   KILLED BY SIGNAL: 15"
    assert process.cause(143, hydra) == "a rank was killed by SIGTERM"
    assert process.cause(137, "") == process.cause(-9, "") == out.cause  # docker run: 128+9
    hydra4 = "=   EXIT CODE: 9\nYOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)"
    assert process.cause(9, hydra4) == out.cause  # MPICH 4's mpirun exits with the signal
    assert process.cause(1, "mpirun noticed that process rank 1 exited on signal 11") == (
        "a rank was killed by SIGSEGV"
    )
    assert process.cause(2, "usage: ...") == process.cause(None, "") == ""
    assert process.cause(137, "", oom_kills=2) == (
        "a rank was killed by the kernel's OOM killer (SIGKILL; 2 OOM kills on this host "
        "during the trial)"
    )
    assert process.cause(143, hydra, oom_kills=1) == "a rank was killed by SIGTERM"
    assert not out.oom_killed and isinstance(process.oom_kills(), int)


def test_parse_result_takes_last_bench_record():
    text = (
        'noise\n{"schema": "kit.bench/2", "a": 1}\n{"other": 2}\n'
        '{"schema": "kit.bench/2", "a": 2}\n'
    )
    assert process.parse_result(text) == {"schema": "kit.bench/2", "a": 2}
    assert process.parse_result("{not json\n") is None


# The launcher starts a mount daemon through a parent that exits a second later (as an
# Apptainer that died before stopping its squashfuse_ll), then waits for the daemon, as
# mpirun waits for the pipes such a daemon holds. Without kit stopping it: the timeout.
ORPHAN = r"""
( "$1" 300 & echo $! > "$2"; sleep 1 )
while [ -d /proc/$(cat "$2") ] && ! grep -q '^State:.*Z' /proc/$(cat "$2")/status; do
  sleep 0.2
done
"""


def test_a_mount_daemon_left_by_a_dead_apptainer_is_stopped(tmp_path):
    daemon = tmp_path / "squashfuse_ll"
    daemon.symlink_to("/bin/sleep")  # its name (comm) is the link's
    t0 = time.monotonic()
    out = process.run(
        ["sh", "-c", ORPHAN, "sh", str(daemon), str(tmp_path / "pid")],
        dict(os.environ),
        60,
        "kit-test-orphan",
        lambda: None,
    )
    assert out.exit_code == 0, out.status
    assert process.ORPHAN_GRACE_S + 1 <= time.monotonic() - t0 < process.ORPHAN_GRACE_S + 10


def test_a_mount_daemon_whose_apptainer_lives_is_left_alone(tmp_path):
    daemon = tmp_path / "squashfuse_ll"
    daemon.symlink_to("/bin/sleep")
    argv = ["sh", "-c", '"$1" 6; true', "sh", str(daemon)]  # its parent waits for it
    out = process.run(argv, dict(os.environ), 60, "kit-test-kept", lambda: None)
    assert out.exit_code == 0 and out.wall_s >= 6
