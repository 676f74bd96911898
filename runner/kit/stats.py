"""Statistics for rates measured over repeated trials.

Throughput is a rate, so trials are summarised by their median and runtimes are
compared by the ratio of medians, never by averaging per-trial ratios. Intervals
are nonparametric: order statistics for a median (exact binomial coverage), and a
seeded percentile bootstrap for a ratio of medians, so reports are reproducible.
"""

import math
import random
import statistics
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float
    coverage: float  # the confidence actually achieved (order statistics are discrete)


def _binom_cdf(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def median_ci(xs: list[float], conf: float = 0.95) -> Interval:
    """Median with the narrowest order-statistic interval whose coverage is >= conf.

    With too few trials for conf (n < 6 at 95%), the interval is [min, max] and
    `coverage` says how much less sure it is.
    """
    if not xs:
        raise ValueError("no values")
    s = sorted(xs)
    n = len(s)
    best = (0, n - 1, 1 - 2 * _binom_cdf(0, n))  # [x_(1), x_(n)]
    for j in range(1, n // 2 + 1):
        coverage = 1 - 2 * _binom_cdf(j - 1, n)
        if coverage < conf:
            break
        best = (j - 1, n - j, coverage)
    return Interval(statistics.median(s), s[best[0]], s[best[1]], best[2])


def ratio_ci(
    a: list[float], b: list[float], conf: float = 0.95, resamples: int = 4000, seed: int = 0
) -> Interval:
    """median(a) / median(b) with a percentile-bootstrap interval (seeded)."""
    if not a or not b:
        raise ValueError("no values")
    rng = random.Random(seed)
    ratios = sorted(
        statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b)))
        for _ in range(resamples)
    )
    tail = (1 - conf) / 2
    low = ratios[math.floor(tail * (resamples - 1))]
    high = ratios[math.ceil((1 - tail) * (resamples - 1))]
    return Interval(statistics.median(a) / statistics.median(b), low, high, conf)


def verdict(ratio: Interval, higher_is_faster: bool = True) -> str:
    """'faster', 'slower' or 'no significant difference' from a ratio's interval."""
    if ratio.low > 1:
        return "faster" if higher_is_faster else "slower"
    if ratio.high < 1:
        return "slower" if higher_is_faster else "faster"
    return "no significant difference"


POWER = 0.8  # the power at which `detectable` states the smallest detectable difference


def detectable(ratio: Interval, power: float = POWER) -> float:
    """The smallest relative difference this comparison would detect with `power`.

    A comparison's interval width comes from the spread of its own trials; an
    effect of d is detected when the interval around 1 + d misses 1, which with a
    normal approximation needs d >= (z_conf + z_power) * SE, and SE = half-width /
    z_conf. So "no significant difference" means "no difference larger than this".
    """
    z_conf = NormalDist().inv_cdf(1 - (1 - ratio.coverage) / 2)
    z_power = NormalDist().inv_cdf(power)
    half_width = (ratio.high - ratio.low) / 2 / ratio.value
    return half_width * (z_conf + z_power) / z_conf
