"""scipy as the oracle of every distribution, quantile and interval kit computes by hand
(kit.analysis.stats, and Welch's interval in kit.across.compare): the runtime stays free
of scipy, the tests hold its figures to scipy's. Seeded data only; each comparison is to
a tolerance far below what a report prints."""

import math
import random

import pytest
from scipy import stats as oracle

from kit.across import compare
from kit.analysis import stats

WHOLE = [1, 2, 3, 4, 5, 7, 10, 19, 30, 120]
FRACTIONAL = [0.6, 1.5, 2.7, 4.2, 7.3, 15.5, 100.25]
P = [0.5, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9995, 0.9999]


@pytest.mark.parametrize("df", WHOLE + FRACTIONAL)
def test_t_cdf_and_quantiles_are_scipys(df):
    for t in (-30.0, -4.0, -1.2, -0.1, 0.0, 0.3, 1.0, 2.1, 6.5, 40.0):
        assert stats.t_cdf(t, df) == pytest.approx(oracle.t.cdf(t, df), abs=1e-12, rel=1e-9)
    for p in P:
        assert stats.t_quantile(p, df) == pytest.approx(oracle.t.ppf(p, df), abs=1e-8, rel=1e-9)


@pytest.mark.parametrize("n", range(0, 41))
def test_the_binomial_null_of_the_median_interval_is_scipys(n):
    got = stats._binomial_cdf(n)
    assert got == pytest.approx([oracle.binom.cdf(j, n, 0.5) for j in range(n + 1)], abs=1e-14)


def _with_positive_ranks(n: int, w: int) -> list[float]:
    """n values of distinct sizes 1..n whose positive ones' ranks sum to w."""
    signs = [-1] * (n + 1)
    for r in range(n, 0, -1):
        if r <= w:
            signs[r], w = 1, w - r
    return [signs[r] * r for r in range(1, n + 1)]


@pytest.mark.parametrize("n", range(1, 26))
def test_the_wilcoxon_signed_rank_null_is_scipys(n):
    """P(W+ <= w), each w: scipy's exact one-sided p-value of values whose W+ is w."""
    cdf = stats._signed_rank_cdf(n)
    assert len(cdf) == n * (n + 1) // 2 + 1 and cdf[-1] == pytest.approx(1)
    for w in range(len(cdf)):
        said = oracle.wilcoxon(_with_positive_ranks(n, w), alternative="less", method="exact")
        assert said.statistic == w
        assert cdf[w] == pytest.approx(said.pvalue, abs=1e-13), w


def _with_u(m: int, n: int, u: int) -> tuple[list[int], list[int]]:
    """Samples of m and n whose Mann-Whitney U (pairs with x above y) is u: x's ranks are
    1..m each moved up, the highest first, by at most n."""
    moves, left = [0] * m, u
    for i in range(m - 1, -1, -1):
        moves[i] = min(n, left, moves[i + 1] if i + 1 < m else n)
        left -= moves[i]
    x = [i + 1 + moves[i] for i in range(m)]
    return x, [r for r in range(1, m + n + 1) if r not in x]


@pytest.mark.parametrize("m, n", [(1, 1), (1, 5), (2, 3), (3, 3), (4, 7), (5, 5), (6, 9), (8, 8)])
def test_the_mann_whitney_null_is_scipys(m, n):
    cdf = stats._rank_sum_cdf(m, n)
    assert len(cdf) == m * n + 1
    for u in range(m * n + 1):
        x, y = _with_u(m, n, u)
        said = oracle.mannwhitneyu(x, y, alternative="less", method="exact")
        assert said.statistic == u
        assert cdf[u] == pytest.approx(said.pvalue, abs=1e-13), u


def _below(v: float, values: list[float]) -> float:
    """A point just below v and above every value below it."""
    under = [x for x in values if x < v]
    return (v + max(under)) / 2 if under else v - 1


@pytest.mark.parametrize("n", [8, 12, 20])  # 8: enough for 0.99 (stats.min_n)
@pytest.mark.parametrize("conf", [0.9, 0.95, 0.99])
def test_the_hodges_lehmann_interval_is_the_inverted_exact_wilcoxon_test(n, conf):
    """Its low end is the least shift the exact test at the coverage it reports does not
    refuse (scipy's p-value just below it: (1 - coverage) / 2), and the next Walsh
    average up would be refused at conf: the narrowest interval that reaches conf."""
    rng = random.Random(n)
    d = [rng.gauss(0.1, 1) for _ in range(n)]
    iv = stats.shift_ci(d, conf)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(n) for j in range(i, n))
    p = oracle.wilcoxon([x - _below(iv.low, walsh) for x in d], alternative="greater").pvalue
    assert p == pytest.approx((1 - iv.coverage) / 2, abs=1e-12) and iv.coverage >= conf
    nxt = walsh[walsh.index(iv.low) + 1]
    p = oracle.wilcoxon([x - _below(nxt, walsh) for x in d], alternative="greater").pvalue
    assert 1 - 2 * p < conf
    assert iv.value == pytest.approx(statistics_median(walsh))


def statistics_median(xs: list[float]) -> float:
    return float(oracle.scoreatpercentile(xs, 50))


@pytest.mark.parametrize("m, n", [(4, 6), (7, 7), (10, 13)])
@pytest.mark.parametrize("conf", [0.9, 0.95])
def test_the_two_sample_shift_interval_is_the_inverted_exact_mann_whitney_test(m, n, conf):
    rng = random.Random(m * 100 + n)
    x = [rng.gauss(0.5, 1) for _ in range(m)]
    y = [rng.gauss(0, 1) for _ in range(n)]
    iv = stats.two_sample_shift_ci(x, y, conf)
    diffs = sorted(a - b for a in x for b in y)
    exact = {"alternative": "greater", "method": "exact"}
    p = oracle.mannwhitneyu([a - _below(iv.low, diffs) for a in x], y, **exact).pvalue
    assert p == pytest.approx((1 - iv.coverage) / 2, abs=1e-12) and iv.coverage >= conf
    nxt = diffs[diffs.index(iv.low) + 1]
    p = oracle.mannwhitneyu([a - _below(nxt, diffs) for a in x], y, **exact).pvalue
    assert 1 - 2 * p < conf
    assert iv.value == pytest.approx(statistics_median(diffs))


@pytest.mark.parametrize("n", [3, 5, 10, 30])
def test_the_mean_interval_is_scipys_t_interval(n):
    rng = random.Random(n)
    d = [rng.gauss(0, 0.05) for _ in range(n)]
    iv = stats.mean_ci(d, 0.95)
    sem = oracle.sem(d)
    low, high = oracle.t.interval(0.95, n - 1, loc=sum(d) / n, scale=sem)
    assert (iv.low, iv.high) == pytest.approx((low, high), abs=1e-10)


@pytest.mark.parametrize("seed", range(6))
def test_the_change_between_campaigns_holds_scipys_welch_interval_at_its_fractional_df(seed):
    """kit compare's interval is the union of Welch's (scipy's ttest_ind, equal_var=False,
    at the Welch-Satterthwaite df unrounded) and the exact rank interval."""
    rng = random.Random(seed)
    a = [rng.gauss(0, 0.02) for _ in range(rng.randint(3, 9))]
    b = [rng.gauss(0.03, 0.06) for _ in range(rng.randint(3, 9))]
    welch = oracle.ttest_ind(b, a, equal_var=False)
    assert welch.df != int(welch.df)  # the fraction the interval now keeps
    low, high = welch.confidence_interval(0.95)
    rank = stats.two_sample_shift_ci(b, a, 0.95)
    iv = compare.change(a, b, 0.95)
    assert math.log(iv.low) == pytest.approx(min(low, rank.low), abs=1e-9)
    assert math.log(iv.high) == pytest.approx(max(high, rank.high), abs=1e-9)
