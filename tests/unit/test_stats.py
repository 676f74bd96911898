"""Intervals on simulated data: exact values, and coverage over many simulated campaigns."""

import random
import statistics

import pytest

from kit import stats


def test_median_ci_order_statistics():
    xs = [float(x) for x in range(1, 11)]  # n = 10: [x_(2), x_(9)] has 97.9% coverage
    iv = stats.median_ci(xs)
    assert (iv.value, iv.low, iv.high) == (5.5, 2.0, 9.0)
    assert iv.coverage == pytest.approx(1 - 2 * 11 / 1024)


def test_median_ci_too_few_trials_says_so():
    iv = stats.median_ci([3.0, 1.0, 2.0])
    assert (iv.low, iv.high) == (1.0, 3.0)
    assert iv.coverage == pytest.approx(0.75)


@pytest.mark.parametrize("n", [8, 12, 20])
def test_median_ci_coverage(n):
    rng = random.Random(n)
    true_median = 100.0  # lognormal(mu) has median exp(mu)
    hits = 0
    runs = 2000
    for _ in range(runs):
        xs = [rng.lognormvariate(4.605170185988092, 0.1) for _ in range(n)]
        iv = stats.median_ci(xs)
        hits += iv.low <= true_median <= iv.high
    assert hits / runs >= 0.93  # nominal >= 0.95, minus simulation noise


def test_ratio_ci_coverage_and_reproducible():
    rng = random.Random(7)
    runs, hits = 300, 0
    for _ in range(runs):
        a = [rng.gauss(95.0, 2.0) for _ in range(10)]
        b = [rng.gauss(100.0, 2.0) for _ in range(10)]
        iv = stats.ratio_ci(a, b, resamples=1000)
        hits += iv.low <= 0.95 <= iv.high
    assert hits / runs >= 0.88  # the percentile bootstrap undercovers a little at n = 10
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 2.5, 3.0]
    assert stats.ratio_ci(a, b) == stats.ratio_ci(a, b)


def test_verdicts():
    rng = random.Random(1)
    same = [[rng.gauss(100, 1) for _ in range(12)] for _ in range(2)]
    assert stats.verdict(stats.ratio_ci(*same)) == "no significant difference"
    slow = [x * 0.9 for x in same[0]]
    iv = stats.ratio_ci(slow, same[1])
    assert stats.verdict(iv) == "slower"
    assert iv.value == pytest.approx(0.9 * statistics.median(same[0]) / statistics.median(same[1]))
    assert stats.verdict(stats.ratio_ci(same[1], slow)) == "faster"


def test_detectable_difference_is_detected_at_about_the_stated_power():
    """Campaigns of 10 trials per arm with 2% noise: an effect as large as the
    detectable figure (the median over A/A campaigns) is found about 80% of the time;
    a tenth of it rarely is."""
    rng = random.Random(11)

    def arm(scale):
        return [rng.gauss(100.0 * scale, 2.0) for _ in range(10)]

    def campaign(effect):
        return stats.ratio_ci(arm(1 - effect), arm(1.0), resamples=500)

    d = statistics.median(stats.detectable(campaign(0.0)) for _ in range(100))
    assert 0.01 < d < 0.05
    found = sum(stats.verdict(campaign(d)) == "slower" for _ in range(200)) / 200
    assert 0.6 <= found <= 0.97
    small = sum(stats.verdict(campaign(d / 10)) == "slower" for _ in range(200)) / 200
    assert small < 0.3
