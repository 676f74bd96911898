"""A sweep benchmark's declared series (kitschema), summarised per arm point by point:
a sweep is read as curves, not compared as one figure.
"""

from collections import defaultdict

from kit.analysis import stats
from kit.analysis.findings import SweepPoint, SweepSeries
from kit.core import benches
from kit.results.record import Trial


def arm_series(
    bench: str, image: str, ranks: int, launcher: str, runtime: str, rs: list[Trial], conf: float
) -> list[SweepSeries]:
    """Each declared series of one arm's sweep: per point, the median over the trials that
    measured it (a series no trial has rows for, e.g. ping-pong with one rank, is left out)."""
    spec = benches.get(bench)
    res = [t.result for t in rs]
    version = stats.mode([x[spec.version] for x in res])
    transport = stats.mode([str(x.get("transport", "-")) for x in res])
    out = []
    for series in spec.series:
        rows: dict[tuple, list[dict]] = defaultdict(list)
        for x in res:
            for row in x[series.field]:
                rows[tuple(row[k] for k in series.at)].append(row)
        points = [
            SweepPoint(
                at,
                {
                    v.key: stats.median_ci([row[v.key] for row in rows[at]], conf)
                    for v in series.values
                },
            )
            for at in sorted(rows)
        ]
        if points:
            out.append(
                SweepSeries(
                    bench,
                    series.field,
                    image,
                    ranks,
                    launcher,
                    runtime,
                    len(rs),
                    version,
                    points,
                    transport,
                )
            )
    return out
