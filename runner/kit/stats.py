"""Statistics for rates measured over repeated launches.

On shared machines a launch carries an offset that longer trials do not remove,
so the launch (one trial) is the unit of replication. Throughput is a rate:
trials are summarised by medians, never by averaging per-trial ratios.

A comparison of two runtime arms uses the campaign's rounds as pairs (every arm
runs once per round, so drift falls on both): the median of the per-round log
ratios, with the order-statistic (sign-test) interval, which is exact and
distribution-free, so heavy-tailed launches cannot make it lie. Where rounds
cannot be paired, the ratio of medians gets a seeded percentile bootstrap.
Intervals that are read together as verdicts are Bonferroni-adjusted, so the
whole report holds at the stated confidence.
"""

import math
import random
import statistics
from dataclasses import dataclass
from functools import cache
from statistics import NormalDist


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float
    coverage: float  # the confidence actually achieved (order statistics are discrete)
    wanted: float = 0.95  # the confidence asked for; coverage below it is marked

    @property
    def short(self) -> bool:
        """Too few values for the confidence asked for: the interval is [min, max]."""
        return self.coverage < self.wanted - 1e-12


@cache
def _order_index(n: int, conf: float) -> tuple[int, float]:
    """j and coverage of the narrowest [x_(j), x_(n-1-j)] (0-based) covering the median
    with probability >= conf (binomial(n, 1/2) tails); j = 0 with less if n is too small."""
    best, coverage = 0, 1 - 2 * 0.5**n
    tail = 0.0  # P(B <= j - 1)
    for j in range(1, n // 2 + 1):
        tail += math.comb(n, j - 1) / 2**n
        if 1 - 2 * tail < conf:
            break
        best, coverage = j - 1, 1 - 2 * tail
    return best, coverage


def min_n(conf: float) -> int:
    """Fewest values whose order-statistic interval of the median reaches conf."""
    return math.ceil(math.log2(2 / (1 - conf)) - 1e-12)


def median_ci(xs: list[float], conf: float = 0.95) -> Interval:
    """Median with the narrowest order-statistic interval whose coverage is >= conf.
    With too few values for conf, the interval is [min, max], marked short."""
    if not xs:
        raise ValueError("no values")
    s = sorted(xs)
    j, coverage = _order_index(len(s), conf)
    return Interval(statistics.median(s), s[j], s[len(s) - 1 - j], coverage, conf)


def paired_ratio(pairs: list[tuple[float, float]], conf: float = 0.95) -> Interval:
    """a/b from rounds (a, b): exp of the median per-round log ratio, with the sign-test
    interval. Symmetric: the ratio b/a gives exactly the reciprocal interval."""
    iv = median_ci([math.log(a / b) for a, b in pairs], conf)
    return Interval(math.exp(iv.value), math.exp(iv.low), math.exp(iv.high), iv.coverage, iv.wanted)


def ratio_ci(
    a: list[float], b: list[float], conf: float = 0.95, resamples: int = 4000, seed: int = 0
) -> Interval:
    """median(a) / median(b) with a percentile-bootstrap interval (seeded), for values
    that cannot be paired. Marked short when either side has fewer values than a median
    interval at conf needs; more resamples when conf leaves thin tails."""
    if not a or not b:
        raise ValueError("no values")
    tail = (1 - conf) / 2
    resamples = max(resamples, math.ceil(20 / tail))
    rng = random.Random(seed)
    ratios = sorted(
        statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b)))
        for _ in range(resamples)
    )
    low = ratios[math.floor(tail * (resamples - 1))]
    high = ratios[math.ceil((1 - tail) * (resamples - 1))]
    n = min(len(a), len(b))
    coverage = conf if n >= min_n(conf) else 1 - 2 * 0.5**n
    return Interval(statistics.median(a) / statistics.median(b), low, high, coverage, conf)


def family_confidence(conf: float, comparisons: int) -> float:
    """Bonferroni: each of m intervals at 1 - (1 - conf) / m, so all hold together at conf."""
    return 1 - (1 - conf) / max(comparisons, 1)


def half_width(iv: Interval) -> float:
    """The interval's larger side, relative to its value (the precision a campaign targets)."""
    return max(iv.high / iv.value - 1, 1 - iv.low / iv.value)


def precise(intervals: list[Interval], target: float) -> bool:
    """The stopping rule of a precision-targeted campaign: every comparison's interval
    is a real one (not short) and no wider than ±target. It looks at widths only, never
    at where the intervals lie, so stopping on it does not steer the verdicts."""
    return all(not iv.short and half_width(iv) <= target for iv in intervals)


def verdict(ratio: Interval, higher_is_faster: bool = True) -> str:
    """'faster', 'slower' or 'no significant difference' from a ratio's interval."""
    if ratio.low > 1:
        return "faster" if higher_is_faster else "slower"
    if ratio.high < 1:
        return "slower" if higher_is_faster else "faster"
    return "no significant difference"


POWER = 0.8  # the power at which `detectable` states the smallest detectable difference


def detectable(ratio: Interval, power: float = POWER) -> float | None:
    """The smallest relative difference this comparison would detect with `power`.

    A comparison's interval width comes from the spread of its own trials; an
    effect of d is detected when the interval around 1 + d misses 1, which with a
    normal approximation needs d >= (z_conf + z_power) * SE, and SE = half-width /
    z_conf. So "no significant difference" means "no difference larger than this".
    """
    if ratio.coverage <= 0:  # one trial a side: no spread to judge from
        return None
    z_conf = NormalDist().inv_cdf(1 - (1 - ratio.coverage) / 2)
    z_power = NormalDist().inv_cdf(power)
    half = (ratio.high - ratio.low) / 2 / ratio.value
    return half * (z_conf + z_power) / z_conf
