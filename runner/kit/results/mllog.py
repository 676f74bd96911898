"""`kit export DIR --format mllog`: a campaign's trials as MLPerf-style `:::MLLOG` lines.

MLCommons' logging format is what training results are exchanged in: one JSON event a
line after the `:::MLLOG ` prefix, its fields in the order namespace, time_ms,
event_type, key, value, metadata (the call site as file and lineno). Each measured
trial becomes one file of its own (one run a file, as MLPerf's tools read them): the
submission's description, the global batch size, init_start/init_stop around the
launch's start-up, run_start/run_stop around the trial (its status success or aborted),
and the throughput of each timed step as tracked_stats (samples/s, with its step). The
events are built by benchmarks/mllog_lines.py, which the benchmarks write theirs with;
mlperf-logging's own parser reads them (tests/unit/results/test_mllog.py).
"""

import re
from pathlib import Path

from kit.core import benches, paths
from kit.core.errors import KitError
from kit.results import record, store
from kit.results.record import Trial

SOURCE = "kit export"  # the metadata's file: these events were written from the records


# benchmarks/mllog_lines.py, the writer the benchmarks use in their images: one event
# builder for the benchmarks and the export
_events = benches.shared("mllog_lines")
PREFIX: str = _events.PREFIX


def lines(t: Trial) -> list[str]:
    """One trial's events, timed from its start label and its own measurements."""
    when = record.started(t)
    if when is None:
        return []
    t0 = int(when.timestamp() * 1000)
    result = t.result or {}
    ok = t.status == "ok"
    figure = benches.metric(t.bench, result) if ok else None
    steps = [_seconds(s) for s in result.get("step_times_s") or []]  # None: skipped, counted
    return _events.run(
        SOURCE,
        {
            "submission_benchmark": f"{t.bench} {t.model}",
            "submission_platform": str(t.host.get("cpu_model", "?")),
            "submission_status": "research",
        },
        t.batch_size * t.ranks,
        t0 + int(1000 * (_seconds(result.get("startup_s")) or 0)),
        t0 + int(1000 * (_seconds(t.wall_s) or 0)),
        steps,
        ok,
        init_start_ms=t0,
        throughput=(result.get(figure.key), figure.unit) if figure else None,
        runtime=t.runtime,
    )


LONGEST_S = 1e9  # seconds (31 years): more is no time a trial took


def _seconds(value: object) -> float | None:
    """A record's seconds as the log times them, or None: no positive number (a failed
    trial's result is as its benchmark printed it: "1.5" was a ValueError), or past
    LONGEST_S (a hand edit's 1e308 overflowed the log's milliseconds)."""
    return value if _events.timed(value) and value < LONGEST_S else None


def export(out_dir: Path, to: Path | None) -> Path:
    """Write each measured trial of the campaign in out_dir as TO/trial-INDEX-ARM.log
    (TO: out_dir/mllog); the folder written."""
    records = [t for t in store.load(out_dir).records if not t.warmup]
    if not records:
        raise KitError(f"no measured trials in {out_dir / store.FILE}; pass a kit run --out DIR")
    folder = to or out_dir / "mllog"
    paths.make_dir(folder, "--out")
    for t in records:
        name = f"trial-{t.index:05d}-{re.sub(r'[^A-Za-z0-9._-]', '_', t.runtime)}.log"
        # a fresh file renamed into place: a link there is replaced, never written through
        paths.write_atomically(folder / name, "\n".join(lines(t)) + "\n")
    return folder
