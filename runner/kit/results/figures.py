"""A trial's figure, as every comparison reads it: which ok trials have one that can be
compared, its value on the benchmark's declared metric, and its value per round (the
pairing key of a round-interleaved campaign).
"""

import math
import statistics
from collections import defaultdict

from kit.core import benches


def figured(ok: list[dict]) -> tuple[list[dict], list[str]]:
    """The ok trials whose figures can be compared, and why each other one cannot: the
    analysis takes logs, and a record kit's own reading did not check (a hand edit, an
    older kit's) may hold 0 or less."""
    kept, notes = [], []
    for r in ok:
        if why := benches.figure_problem(r["bench"], r["result"]):
            notes.append(f"trial {r['index']} of campaign {r['campaign']} ({r['runtime']}): {why}")
        else:
            kept.append(r)
    return kept, notes


def rates(rs: list[dict]) -> list[float]:
    """Each trial's figure on its benchmark's declared metric."""
    return [r["result"][benches.metric(r["bench"], r["result"]).key] for r in rs]


def by_round(rs: list[dict]) -> dict[tuple, float]:
    """The metric per (campaign, round), the pairing key of a round-interleaved campaign:
    the geometric mean where the arm ran more than once in the round (the baseline)."""
    logs: dict[tuple, list[float]] = defaultdict(list)
    paired = [r for r in rs if isinstance(r.get("repeat"), int)]
    for r, x in zip(paired, rates(paired), strict=True):
        logs[(r["campaign"], r["repeat"])].append(math.log(x))
    return {k: math.exp(statistics.fmean(v)) for k, v in logs.items()}
