"""A trial's figure, as every comparison reads it: which ok trials have one that can be
compared, its value on the benchmark's declared metric, and its value per round (the
pairing key of a round-interleaved campaign).
"""

import math
import statistics
from collections import defaultdict

from kit.core import benches
from kit.results.record import Trial


def figured(ok: list[Trial]) -> tuple[list[Trial], list[str]]:
    """The ok trials whose figures can be compared, and why each other one cannot: the
    analysis takes logs, and a record kit's own reading did not check (a hand edit, an
    older kit's) may hold 0 or less."""
    kept, notes = [], []
    for t in ok:
        if why := benches.figure_problem(t.bench, t.result):
            notes.append(f"trial {t.index} of campaign {t.campaign} ({t.runtime}): {why}")
        else:
            kept.append(t)
    return kept, notes


def rates(rs: list[Trial]) -> list[float]:
    """Each trial's figure on its benchmark's declared metric."""
    return [t.result[benches.metric(t.bench, t.result).key] for t in rs]


def by_round(rs: list[Trial]) -> dict[tuple, float]:
    """The metric per (campaign, round), the pairing key of a round-interleaved campaign:
    the geometric mean where the arm ran more than once in the round (the baseline)."""
    logs: dict[tuple, list[float]] = defaultdict(list)
    paired = [t for t in rs if t.repeat is not None]
    for t, x in zip(paired, rates(paired), strict=True):
        logs[(t.campaign, t.repeat)].append(math.log(x))
    return {k: math.exp(statistics.fmean(v)) for k, v in logs.items()}
