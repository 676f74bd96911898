"""Statistics for rates measured over repeated launches.

On shared machines a launch carries an offset that longer trials do not remove,
so the launch (one trial) is the unit of replication. Throughput is a rate:
trials are summarised by medians, never by averaging per-trial ratios.

A comparison of two runtime arms uses the campaign's rounds as pairs (every arm
runs in every round, so drift falls on both): the mean of the per-round log ratios
(the geometric mean ratio), so that a cost which comes in some launches only counts at
its full share, with the union of Student's t interval and the Wilcoxon interval of the
Hodges-Lehmann centre (each covers the mean where the other falls short). `disturbed`
names the launches far slower than a robust two-way fit (arm + round) predicts; the
analysis leaves one out only where its record shows outside load, and checks the
verdict with those put back by the Hodges-Lehmann centre and its exact Wilcoxon
interval. Where rounds
cannot be paired, the two-sample Hodges-Lehmann shift of the log rates gets the
Mann-Whitney interval. Intervals read together as verdicts are Bonferroni-adjusted,
so the whole report holds at the stated confidence. docs/statistics.md argues each
choice and shows the coverage measured by simulation.
"""

import itertools
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Hashable
from dataclasses import dataclass
from functools import cache
from statistics import NormalDist
from typing import TypeVar


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
def _binomial_cdf(n: int) -> tuple[float, ...]:
    """P(B <= j) for B ~ binomial(n, 1/2): how many of n values fall below the median."""
    return tuple(itertools.accumulate(math.comb(n, j) / 2**n for j in range(n + 1)))


def min_n(conf: float) -> int:
    """Fewest values whose widest interval ([min, max] of the values, or of their Walsh
    averages) reaches conf: both miss with probability 2 / 2^n."""
    return math.ceil(math.log2(2 / (1 - conf)) - 1e-12)


T = TypeVar("T")


def mode(values: list[T]) -> T:
    """The most common value (the first seen among equals): what most trials said of a
    fact that is no rate (a version, a host count)."""
    return Counter(values).most_common(1)[0][0]


def median_ci(xs: list[float], conf: float = 0.95) -> Interval:
    """Median with the narrowest order-statistic interval whose coverage is >= conf.
    With too few values for conf, the interval is [min, max], marked short."""
    if not xs:
        raise ValueError("no values")
    s = sorted(xs)
    j, coverage = _depth(_binomial_cdf(len(s)), conf)
    return Interval(statistics.median(s), s[j], s[-1 - j], coverage, conf)


@cache
def _signed_rank_cdf(n: int) -> tuple[float, ...]:
    """P(W+ <= w) for w = 0 .. n(n+1)/2: the Wilcoxon signed-rank statistic of n values
    symmetric about the true centre (every sign pattern equally likely)."""
    return tuple(itertools.accumulate(_signed_rank_pmf(n)))


@cache
def _signed_rank_pmf(n: int) -> tuple[float, ...]:
    if n == 0:
        return (1.0,)
    prev = _signed_rank_pmf(n - 1)
    pmf = [0.0] * (len(prev) + n)
    for w, p in enumerate(prev):
        pmf[w] += p / 2
        pmf[w + n] += p / 2
    return tuple(pmf)


@cache
def _rank_sum_cdf(m: int, n: int) -> tuple[float, ...]:
    """P(U <= u) for the Mann-Whitney U of samples of m and n exchangeable values: the
    coefficients of the Gaussian binomial (m+n choose m) in q, over their sum."""
    poly = [1]
    for i in range(1, m + 1):
        poly = poly + [0] * (n + i)  # times (1 - q^(n+i)), then divided by (1 - q^i)
        for k in range(len(poly) - 1, n + i - 1, -1):
            poly[k] -= poly[k - n - i]
        for k in range(i, len(poly)):
            poly[k] += poly[k - i]
        while len(poly) > 1 and poly[-1] == 0:
            poly.pop()
    total = math.comb(m + n, m)
    return tuple(itertools.accumulate(c / total for c in poly))


def _depth(cdf: tuple[float, ...], conf: float) -> tuple[int, float]:
    """j and coverage of the narrowest [x_(j), x_(M-1-j)] (0-based, of M sorted values,
    Walsh averages or differences) that covers the centre with probability >= conf, from
    the statistic's null cdf; j = 0, with less coverage, when there are too few for conf."""
    best, coverage = 0, 1 - 2 * cdf[0]
    for j in range(1, len(cdf) // 2):
        c = 1 - 2 * cdf[j]
        if c < conf - 1e-12:
            break
        best, coverage = j, c
    return best, coverage


def shift_ci(d: list[float], conf: float = 0.95) -> Interval:
    """The centre of d (the Hodges-Lehmann estimate: the median of the Walsh averages
    (d_i + d_j) / 2, i <= j) with the Wilcoxon signed-rank interval: exact for any
    continuous distribution symmetric about that centre, at the coverage it reports."""
    if not d:
        raise ValueError("no values")
    n = len(d)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(n) for j in range(i, n))
    j, coverage = _depth(_signed_rank_cdf(n), conf)
    return Interval(statistics.median(walsh), walsh[j], walsh[-1 - j], coverage, conf)


def two_sample_shift_ci(x: list[float], y: list[float], conf: float = 0.95) -> Interval:
    """The shift x - y (Hodges-Lehmann: the median of all differences x_i - y_j) with the
    Mann-Whitney interval: exact when x and y differ by a shift only."""
    if not x or not y:
        raise ValueError("no values")
    m, n = sorted((len(x), len(y)))
    if m * n <= 10_000:
        j, coverage = _depth(_rank_sum_cdf(m, n), conf)
    else:  # the normal approximation of U, far past where it is accurate
        z = NormalDist().inv_cdf(0.5 + conf / 2)
        half = z * math.sqrt(m * n * (m + n + 1) / 12)
        j, coverage = max(0, math.floor(m * n / 2 - half)), conf
    total = m * n
    middle = [(total - 1) // 2, total // 2]  # the median: one value, or the mean of two
    if total <= ALL_DIFFERENCES:
        diffs = sorted(a - b for a in x for b in y)
        low, high, *mid = (diffs[k] for k in (j, total - 1 - j, *middle))
    else:  # 5,000 rounds a side: 25 million differences, minutes to sort
        low, high, *mid = _ranked_differences(x, y, [j, total - 1 - j, *middle])
    return Interval((mid[0] + mid[1]) / 2, low, high, coverage, conf)


ALL_DIFFERENCES = 250_000  # up to this many, sorted; past it, each rank is found alone


def _ranked_differences(x: list[float], y: list[float], ranks: list[int]) -> list[float]:
    """The differences x_i - y_j of the given ranks (0-based, ascending), exactly as
    sorting them all would give, without forming them: each by bisection on the value,
    counting the differences at or below it (numpy's searchsorted over the sorted y),
    until few enough are left between the bounds to list and sort (O((m + n) log) each)."""
    import numpy as np  # only here: its import costs what a small comparison takes

    xs, ys = np.sort(np.asarray(x, dtype=float)), np.sort(np.asarray(y, dtype=float))
    few = 4 * (len(xs) + len(ys))

    def at_most(v: float) -> int:  # how many x_i - y_j <= v, i.e. y_j >= x_i - v
        return int(len(ys) * len(xs) - np.searchsorted(ys, xs - v, side="left").sum())

    out = []
    for r in ranks:
        lo, hi = float(xs[0] - ys[-1]) - 1.0, float(xs[-1] - ys[0])
        below, upto = 0, len(xs) * len(ys)
        while upto - below > few:
            mid = lo + (hi - lo) / 2
            if not lo < mid < hi:  # no float between: ties, listed as they are
                break
            c = at_most(mid)
            lo, below, hi, upto = (lo, below, mid, c) if c > r else (mid, c, hi, upto)
        starts = np.searchsorted(ys, xs - hi, side="left")  # y_j >= x_i - hi: x_i - y_j <= hi
        ends = np.searchsorted(ys, xs - lo, side="left")  # y_j < x_i - lo: x_i - y_j > lo
        listed = np.concatenate(
            [xs[i] - ys[a:b] for i, (a, b) in enumerate(zip(starts, ends, strict=True)) if b > a]
        )
        out.append(float(np.sort(listed)[r - below]))
    return out


def _exp(iv: Interval) -> Interval:
    return Interval(math.exp(iv.value), math.exp(iv.low), math.exp(iv.high), iv.coverage, iv.wanted)


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with df degrees of freedom: for a whole number exact (the
    finite series of Abramowitz & Stegun 26.7.3-4), for a fraction (Welch's) through the
    regularized incomplete beta function (A&S 26.7.1); no table, no library."""
    if df != int(df):  # each side from its own argument: 1 - x would lose a small one
        x, y = df / (df + t * t), t * t / (df + t * t)
        if y < 0.5:
            centre = _beta_inc(0.5, df / 2, y) / 2  # P(0 < T < |t|)
            return 0.5 + centre if t > 0 else 0.5 - centre
        tail = _beta_inc(df / 2, 0.5, x) / 2  # P(T > |t|)
        return 1 - tail if t > 0 else tail
    df = int(df)
    theta = math.atan2(t, math.sqrt(df))
    c2, term, total = math.cos(theta) ** 2, 1.0, 1.0
    if df % 2:  # odd: (2/pi)(theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        inner = theta + (math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0)
        a = 2 / math.pi * inner
    else:  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        a = math.sin(theta) * total
    return 0.5 + a / 2


def _beta_inc(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, by its continued fraction
    (A&S 26.5.8, evaluated by Lentz's method), on the side of x where it converges fast."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    if x > (a + 1) / (a + b + 2):
        return 1 - _beta_inc(b, a, 1 - x)
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 10_000):
        for coefficient in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + coefficient * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + coefficient / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return front * f / a


@cache
def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p, by bisection of t_cdf (to 1e-10, relative past 1), in a
    bracket widened until it holds t (one degree of freedom at 0.9999 is past 3000)."""
    high = 1.0
    while t_cdf(high, df) < p or t_cdf(-high, df) > p:
        high *= 2
    low = -high
    while high - low > 1e-10 * max(1.0, abs(low), abs(high)):
        mid = (low + high) / 2
        low, high = (mid, high) if t_cdf(mid, df) < p else (low, mid)
    return (low + high) / 2


MIN_ROUNDS = 3  # fewest values a mean's interval is formed from (two give no spread to trust)


def mean_ci(d: list[float], conf: float = 0.95) -> Interval:
    """The mean of d with Student's t interval. The mean, not a robust centre: a cost
    that comes in some launches only (a runtime's intermittently slow start) counts at
    its full share, where a median or Hodges-Lehmann centre would discount it; a wild
    value widens the interval instead of vanishing. With fewer than MIN_ROUNDS values the
    interval is [min, max], marked short."""
    if not d:
        raise ValueError("no values")
    n, m = len(d), statistics.fmean(d)
    if n < MIN_ROUNDS:
        return Interval(m, min(d), max(d), 0.0, conf)
    half = t_quantile(0.5 + conf / 2, n - 1) * statistics.stdev(d) / math.sqrt(n)
    return Interval(m, m - half, m + half, conf, conf)


def paired_ratio(pairs: list[tuple[float, float]], conf: float = 0.95) -> Interval:
    """a/b from rounds (a, b): the geometric mean ratio (exp of the mean per-round log
    ratio), with the union of its t interval and the Wilcoxon interval of the
    Hodges-Lehmann centre. Where one arm is slow in some launches only, the log ratios are
    skewed and at ten rounds the t interval alone holds the mean in fewer campaigns than it
    states (family-wise 0.927 for 0.95 in the simulations); the rank interval covers it
    there, and t covers it where the centre and the mean part. Symmetric: the ratio b/a
    gives exactly the reciprocal interval."""
    logs = [math.log(a / b) for a, b in pairs]
    mean, centre = mean_ci(logs, conf), shift_ci(logs, conf)
    if mean.short:
        return _exp(mean)
    low, high = min(mean.low, centre.low), max(mean.high, centre.high)
    return _exp(Interval(mean.value, low, high, conf, conf))


def robust_paired_ratio(pairs: list[tuple[float, float]], conf: float = 0.95) -> Interval:
    """a/b from rounds (a, b): exp of shift_ci of the per-round log ratios (the
    Hodges-Lehmann centre with the exact Wilcoxon interval), which a few wild rounds do not
    move: the check of a verdict with the launches another job slowed put back in."""
    return _exp(shift_ci([math.log(a / b) for a, b in pairs], conf))


def ratio_ci(a: list[float], b: list[float], conf: float = 0.95) -> Interval:
    """a/b for values that cannot be paired: exp of the two-sample shift of the log rates,
    with the Mann-Whitney interval."""
    if not a or not b:
        raise ValueError("no values")
    return _exp(two_sample_shift_ci([math.log(x) for x in a], [math.log(y) for y in b], conf))


DISTURBED_SLOWDOWN = 1.3  # a launch at least this much slower than predicted ...
DISTURBED_SCALES = 5.0  # ... and by this many robust scales of the launch noise


def disturbed(cells: list[tuple[str, Hashable, float]]) -> set[int]:
    """Which launches another job slowed: positions in `cells` (arm, round, log rate).

    An additive fit, log rate = arm + round, by median polish (a few bad cells do not move
    it), predicts each launch; one that ran more than DISTURBED_SLOWDOWN times slower than
    predicted and more than DISTURBED_SCALES robust scales (1.4826 MAD of the residuals)
    below it is named. Other load only slows a launch, so only slow ones are; a whole
    round slowed alike moves its round term, not its residuals, and stays. Needs three
    rounds or more to tell a launch from its round."""
    by_arm: dict[str, list[int]] = defaultdict(list)
    by_round: dict[Hashable, list[int]] = defaultdict(list)
    for i, (arm, rnd, _) in enumerate(cells):
        by_arm[arm].append(i)
        by_round[rnd].append(i)
    if len(by_round) < 3:
        return set()
    resid = [y for _, _, y in cells]
    for _ in range(10):
        for groups in (by_round, by_arm):
            for members in groups.values():
                centre = statistics.median(resid[i] for i in members)
                for i in members:
                    resid[i] -= centre
    scale = 1.4826 * statistics.median(abs(x) for x in resid)
    limit = max(DISTURBED_SCALES * scale, math.log(DISTURBED_SLOWDOWN))
    return {i for i, x in enumerate(resid) if x < -limit}


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
    if ratio.coverage <= 0 or ratio.high <= ratio.low:  # no spread to judge from
        return None
    z_conf = NormalDist().inv_cdf(1 - (1 - ratio.coverage) / 2)
    z_power = NormalDist().inv_cdf(power)
    half = (ratio.high - ratio.low) / 2 / ratio.value
    return half * (z_conf + z_power) / z_conf


LAUNCH_SD = 0.05  # between-launch relative SD assumed when choosing a trial's length: 4-6 %
# measured on the project's 2-core VMs (docs/statistics.md)


def trial_seconds(fixed_s: float, step_s: float, step_cv: float, launch_sd: float) -> float:
    """The timed length of a trial that narrows a comparison most per minute.

    A launch costs fixed_s (start-up, warm-up steps, exit) plus T timed seconds, and its
    figure's variance is launch_sd^2 (the launch's own offset, which no length removes)
    plus step_cv^2 step_s / T (the steps' noise, averaged over T / step_s steps). Width
    per minute goes as sqrt(variance x cost), least at T = sqrt(fixed_s step_cv^2 step_s)
    / launch_sd: longer trials only buy down the part that averages out."""
    return math.sqrt(max(fixed_s, 0.0) * step_cv**2 * step_s) / launch_sd
