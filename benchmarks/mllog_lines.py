"""MLPerf-style `:::MLLOG` event lines, standard library only (Python 3.9: the Caffe2 images).

MLCommons' `mlperf-logging` writes training logs as one JSON event a line after the
`:::MLLOG ` prefix. The benchmarks run in images without that package, so this file writes
the same lines itself; `kit export DIR --format mllog` (runner/kit/results/mllog.py) builds
its events here too, so there is one builder. The unit tests read both with the package's
own parser.

A benchmark's rank 0 appends its run to the file KIT_MLLOG names (`write`, called when the
record is printed), never to stdout or stderr: stdout carries the record kit reads, and
stderr's last MiB is what a failed trial keeps to explain itself, which an event a step
would crowd out. A file is also how MLPerf's tools read a run.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kitschema import Metric

PREFIX = ":::MLLOG "
ENV = "KIT_MLLOG"  # the file a benchmark appends its run's events to; unset: none written
POINT = "POINT_IN_TIME"


def event(
    time_ms: int, event_type: str, key: str, value: object, source: str, **metadata: object
) -> str:
    """One event, its fields in the order mlperf-logging's encoder writes them, the
    metadata starting with the call site (file, lineno) as that package's does; the
    events here are built from measurements already taken, so the file is `source` and
    the line 0."""
    return PREFIX + json.dumps(
        {
            "namespace": "",
            "time_ms": time_ms,
            "event_type": event_type,
            "key": key,
            "value": value,
            "metadata": {"file": source, "lineno": 0, **metadata},
        }
    )


def timed(step_s: object) -> bool:
    """Whether a recorded step time can be logged: a finite number of seconds above 0."""
    return (
        isinstance(step_s, (int, float))
        and not isinstance(step_s, bool)
        and math.isfinite(step_s)
        and step_s > 0
    )


def run(
    source: str,
    submission: dict[str, object],
    global_batch_size: int,
    start_ms: int,
    stop_ms: int,
    step_times_s: list,
    success: bool,
    init_start_ms: int | None = None,
    throughput: tuple[object, str] | None = None,
    **run_metadata: object,
) -> list[str]:
    """One run's events: the submission's description (POINT_IN_TIME events) and the
    global batch size; init_start/init_stop up to run_start when the launch's start is
    known; run_start; a successful run's steps laid end to end from run_start, each
    step's throughput (samples/s, its step numbered from 1) as tracked_stats at its
    end; the run's figure (value, unit) when given; run_stop, status success or aborted."""
    first = start_ms if init_start_ms is None else init_start_ms
    out = [event(first, POINT, key, value, source) for key, value in submission.items()]
    out.append(event(first, POINT, "global_batch_size", global_batch_size, source))
    if init_start_ms is not None:
        out.append(event(init_start_ms, "INTERVAL_START", "init_start", None, source))
        out.append(event(start_ms, "INTERVAL_END", "init_stop", None, source))
    out.append(event(start_ms, "INTERVAL_START", "run_start", None, source, **run_metadata))
    elapsed_s = 0.0
    for step, step_s in enumerate(step_times_s if success else [], 1):
        if timed(step_s):
            elapsed_s += step_s
            stats = {"throughput": global_batch_size / step_s}
            at = start_ms + round(1000 * elapsed_s)
            out.append(event(at, POINT, "tracked_stats", stats, source, step=step))
    if throughput is not None:
        value, unit = throughput
        out.append(event(stop_ms, POINT, "throughput", value, source, unit=unit))
    status = "success" if success else "aborted"
    out.append(event(stop_ms, "INTERVAL_END", "run_stop", None, source, status=status))
    return out


def from_record(rec: dict, stop_s: float, source: str, metric: Metric | None = None) -> list[str]:
    """A kit.bench record's run, ending at stop_s (epoch seconds): the record is printed
    after the timed steps, so run_start is put their recorded time before the end."""
    steps = rec.get("step_times_s") or []
    stop_ms = int(1000 * stop_s)
    ok = rec["status"] == "ok"
    return run(
        source,
        {"submission_benchmark": f"{rec['bench']} {rec['model']}"},
        rec["batch_size"] * rec["ranks"],
        stop_ms - round(1000 * sum(s for s in steps if timed(s))),
        stop_ms,
        steps,
        ok,
        throughput=(rec.get(metric.key), metric.unit) if ok and metric else None,
    )


def write(rec: dict, metric: Metric | None = None) -> None:
    """Append a training record's run to the file KIT_MLLOG names: nothing when it is
    unset or the record is a sweep's (no batch, no steps). A file that cannot be written
    is said on stderr and the benchmark goes on: the record, printed, is the result."""
    path = os.environ.get(ENV)
    if not path or "batch_size" not in rec:
        return
    source = os.path.basename(sys.argv[0]) or "kitbench"
    try:
        with open(path, "a") as f:
            f.write("".join(line + "\n" for line in from_record(rec, time.time(), source, metric)))
    except OSError as e:
        print(f"kitbench: {ENV}={path}: {e.strerror}; no MLLOG lines written", file=sys.stderr)
