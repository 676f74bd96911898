"""Trials leave nothing behind: real process trees, stopped on timeout and on Ctrl-C."""

import os
import signal
import sys
import threading
import time

from kit import trial

# A launcher whose grandchild escapes the way squashfuse_ll does: a new session
# and an emptied environment, so only watching the tree can find it.
ESCAPER = r"""
import os, subprocess, sys, time
subprocess.Popen(["setsid", "env", "-i", sys.executable, "-c",
                  "import time; time.sleep(300)"])
print('{"schema": "kit.bench/2", "images_per_sec": 1.0}', flush=True)
time.sleep(float(sys.argv[1]))
"""


def alive(pids):
    return [p for p in pids if trial._stat(p) is not None]


def run_escaper(sleep_s, timeout, marker):
    cleaned = []
    out = trial.run(
        [sys.executable, "-c", ESCAPER, str(sleep_s)],
        dict(os.environ),
        timeout,
        marker,
        lambda: cleaned.append(True),
    )
    return out, cleaned


def test_ok_trial_parses_record_and_reaps_escaped_child():
    out, cleaned = run_escaper(1.0, 30, "t-ok")
    assert out.status == "ok"
    assert out.result == {"schema": "kit.bench/2", "images_per_sec": 1.0}
    assert cleaned == [True]
    time.sleep(0.2)
    assert not trial.marked("t-ok")


def test_timeout_stops_whole_tree():
    t0 = time.monotonic()
    tree_seen = []
    real_stop = trial.stop

    def spy(proc, tree, marker):
        real_stop(proc, tree, marker)
        tree_seen.extend(tree.seen)

    trial.stop = spy
    try:
        out, cleaned = run_escaper(300, 2, "t-timeout")
    finally:
        trial.stop = real_stop
    assert out.status == "timeout"
    assert time.monotonic() - t0 < 15
    assert tree_seen  # the escaped sleeper (setsid and env exec in place)
    assert alive(tree_seen) == []
    assert cleaned == [True]


def test_interrupt_stops_whole_tree_and_reports_interrupted():
    timer = threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    out, cleaned = run_escaper(300, 60, "t-int")
    assert out.status == "interrupted"
    assert cleaned == [True]


def test_failed_trial_keeps_output_tail():
    out = trial.run(
        [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"],
        dict(os.environ),
        30,
        "t-fail",
        lambda: None,
    )
    assert (out.status, out.exit_code, out.result) == ("failed", 3, None)
    assert out.output_tail == "boom"


def test_parse_result_takes_last_bench_record():
    text = (
        'noise\n{"schema": "kit.bench/2", "a": 1}\n{"other": 2}\n'
        '{"schema": "kit.bench/2", "a": 2}\n'
    )
    assert trial.parse_result(text) == {"schema": "kit.bench/2", "a": 2}
    assert trial.parse_result("{not json\n") is None
