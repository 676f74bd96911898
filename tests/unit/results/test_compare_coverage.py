"""`kit compare`'s intervals hold family-wise (results/compare.change, Bonferroni over
four comparisons at 95 %), on the cases it was built for and on the adversarial ones:
one side far noisier, one side's runtime intermittently slow, a skewed tail. Each
campaign's per-round log ratios are drawn afresh; the truth is the difference of the
two sides' expected log ratios (the geometric-mean change compare estimates)."""

import math
import random

import pytest

from kit.across import compare
from kit.analysis import stats

COMPARISONS, CONF = 4, 0.95
EACH = stats.family_confidence(CONF, COMPARISONS)


def normal(sd: float):
    return lambda rng: rng.gauss(0.0, sd), 0.0


def intermittent(sd: float, share: float, slowdown: float):
    """A runtime slower by `slowdown` in `share` of its rounds: its mean log ratio moves."""
    return (
        lambda rng: rng.gauss(0.0, sd) - (math.log(slowdown) if rng.random() < share else 0.0),
        -share * math.log(slowdown),
    )


def skewed(sd: float):
    """A slow tail: exponential, centred on its mean."""
    return lambda rng: sd * (1.0 - rng.expovariate(1.0)), 0.0


QUIET = (normal(0.04), normal(0.04))
# each scenario's sides for the first comparison; the other three are QUIET, except where
# the whole machine changed (every comparison noisier or skewed on B)
SCENARIOS = {
    "normal 4 % both": (QUIET, False),
    "B 5x noisier, every runtime": ((normal(0.04), normal(0.20)), True),
    "one runtime 1.35x slower in 30 % of B's rounds": (
        (normal(0.04), intermittent(0.04, 0.3, 1.35)), False),
    "one runtime 1.5x slower in 30 % of B's rounds": (
        (normal(0.04), intermittent(0.04, 0.3, 1.5)), False),
    "one runtime 2x slower in 30 % of B's rounds": (
        (normal(0.04), intermittent(0.04, 0.3, 2.0)), False),
    "skewed tail, every runtime": ((skewed(0.06), skewed(0.06)), True),
}  # fmt: skip


def family_coverage(scenario: str, rounds: int, campaigns: int, seed: int) -> float:
    first, every = SCENARIOS[scenario]
    rng = random.Random(seed)
    held = 0
    for _ in range(campaigns):
        ok = True
        for i in range(COMPARISONS):
            (draw_a, mean_a), (draw_b, mean_b) = first if i == 0 or every else QUIET
            truth = mean_b - mean_a
            a = [draw_a(rng) for _ in range(rounds)]
            b = [draw_b(rng) for _ in range(rounds)]
            iv = compare.change(a, b, EACH)
            ok &= math.log(iv.low) <= truth <= math.log(iv.high)
        held += ok
    return held / campaigns


@pytest.mark.parametrize("rounds", [10, 20])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_four_intervals_hold_together_at_their_stated_confidence(scenario, rounds):
    """1,000 campaigns a cell (seeded: the same draws each run), Monte Carlo SE about 0.007
    at 0.95; 0.92 is the bound, three SEs under the 0.94 the worst cell reaches. Where one
    runtime is slow in some rounds only, its own interval holds in about 0.975 of
    campaigns where it states 0.9875 (the mean of so skewed a sample is too high when few
    slow rounds were drawn): docs/statistics.md, Between campaigns."""
    assert family_coverage(scenario, rounds, 1000, seed=rounds) >= 0.92


def test_a_shift_of_ten_percent_is_found_at_twenty_rounds():
    rng = random.Random(3)
    a = [rng.gauss(0.0, 0.04) for _ in range(20)]
    b = [math.log(0.9) + rng.gauss(0.0, 0.04) for _ in range(20)]
    iv = compare.change(a, b, EACH)
    assert iv.high < 1 and iv.low <= 0.9 <= iv.high
