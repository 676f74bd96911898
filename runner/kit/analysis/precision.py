"""What a narrower interval would cost on this machine, from a campaign's own intervals.

A paired comparison's interval narrows as 1/sqrt(rounds) at a given spread of the
per-round log ratios, wild rounds included in the proportion this campaign had them:
one of n rounds whose log half-width is h reaches log(1 + p) in about
n (h / log(1 + p))^2 rounds, never fewer than an interval needs (stats.MIN_ROUNDS).
Scaling the campaign's own widths, rather than a spread computed apart from them,
prices what its launches really cost, its slow ones included.
The widest comparison decides, since a report's verdicts hold together.
"""

import itertools
import math
import statistics
from dataclasses import dataclass
from datetime import datetime

from kit.analysis import stats
from kit.results import record
from kit.results.record import Trial

TARGETS = (0.05, 0.02)  # the precisions a report prices


@dataclass(frozen=True)
class Projection:
    precision: float  # the half-width priced, e.g. 0.05
    rounds: int  # rounds it takes at this campaign's spread
    minutes: float | None  # at this campaign's time a round (None: not measured)


def rounds_for(ratio: stats.Interval, rounds: int, precision: float) -> int:
    """Rounds for a half-width of ±precision, from an interval over `rounds` rounds."""
    h = math.log1p(stats.half_width(ratio))
    return max(stats.MIN_ROUNDS, math.ceil(rounds * (h / math.log1p(precision)) ** 2))


def round_seconds(records: list[Trial]) -> float | None:
    """The campaign's wall time a round, launches and kit's own time included: the median
    step between the starts of consecutive rounds (None with fewer than two)."""
    starts: dict[tuple, datetime] = {}
    for t in records:
        if t.repeat is not None and (when := record.started(t)) is not None:
            key = (t.campaign, t.repeat)
            starts[key] = min(starts.get(key, when), when)
    keys = sorted(starts)
    steps = [
        (starts[b] - starts[a]).total_seconds()
        for a, b in itertools.pairwise(keys)
        if a[0] == b[0] and b[1] == a[1] + 1
    ]
    steps = [s for s in steps if s > 0]
    return statistics.median(steps) if steps else None


@dataclass(frozen=True)
class Allowance:
    """How one comparison's interval compares with what the launch spread allows."""

    factor: float  # its half-width over the half-width the spread allows in its rounds
    expected: float  # the SD of a round's log ratio that the launch spread predicts
    own: float  # the SD its rounds' log ratios had


def allowed(launch_sd: float, rounds: int, conf: float, baseline_launches: float = 1.0) -> float:
    """The half-width a paired ratio reaches in `rounds` rounds when launches vary by
    `launch_sd` (SD of a launch's log figure) and nothing else does: a round's log ratio
    then has SD launch_sd * sqrt(1 + 1/B) (B baseline launches a round), and the exact t
    interval of its mean is the narrowest a method valid at that many rounds can give."""
    sd = launch_sd * math.sqrt(1 + 1 / baseline_launches)
    return math.expm1(stats.t_quantile(0.5 + conf / 2, rounds - 1) * sd / math.sqrt(rounds))


def allowance(
    half: float, rounds: int, launches: float, conf: float, own: float | None,
    launch_sd: float | None,
) -> Allowance | None:  # fmt: skip
    """A paired comparison's half-width `half` over `rounds` rounds (the baseline run
    `launches` times a round), at confidence `conf`, against allowed(); None where it is
    not paired, has fewer than stats.MIN_ROUNDS rounds, or no launch spread was measured."""
    if own is None or not launch_sd or rounds < stats.MIN_ROUNDS:
        return None
    width = allowed(launch_sd, rounds, conf, launches)
    return Allowance(half / width, launch_sd * math.sqrt(1 + 1 / launches), own)


def project(compared: list[tuple[stats.Interval, int]], records: list[Trial]) -> list[Projection]:
    """Rounds and minutes each of TARGETS takes for every paired comparison at once (the
    widest decides), from the campaign's intervals (with the rounds each paired, 0 where
    unpaired) and its time a round; nothing before three rounds or where an interval is
    short of rounds."""
    paired = [(iv, n) for iv, n in compared if n]
    if not paired or any(iv.short or n < 3 for iv, n in paired):
        return []
    per_round = round_seconds(records)
    out = []
    for p in TARGETS:
        n = max(rounds_for(iv, rounds, p) for iv, rounds in paired)
        out.append(Projection(p, n, n * per_round / 60 if per_round else None))
    return out
