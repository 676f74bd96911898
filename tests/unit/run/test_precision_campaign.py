"""Precision-targeted campaigns: rounds, the stopping rule and its budget; number parsing."""

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kit.analysis import stats
from kit.core import units
from kit.core.errors import KitError
from kit.run import plan

from ..records import record, typed

CONFIG = plan.Config("torch-cnn", "tiny", 32, 1)


def design(target=None, repeats=6, warmups=1):
    return plan.Design(["native", "docker"], [CONFIG], repeats, warmups, 0, target)


def rounds_of(rng, n, spread, ratio=1.0, wall=2.0):
    out = []
    for r in range(n):
        for rt, scale in (("native", 1.0), ("docker", ratio)):
            rate = 1000 * scale * math.exp(rng.gauss(0, spread))
            out.append(record(rt, rate, repeat=r, index=2 * r, wall_s=wall))
    return typed(out)


def test_a_fixed_design_stops_after_its_rounds():
    d = design()
    assert plan.stop_reason(d, [], 6, 1e9) is None  # no budget: the time spent is no matter
    assert plan.stop_reason(d, [], 7, 0) == ""


def test_stops_when_every_comparison_is_precise_enough():
    d = design(plan.Target(0.02, 3600))
    tight = rounds_of(random.Random(1), 12, 0.002)
    why = plan.stop_reason(d, tight, 13, 26)
    assert why.startswith("precision ±2.0% reached after 13 rounds (docker ±")
    noisy = rounds_of(random.Random(1), 12, 0.10)
    assert plan.stop_reason(d, noisy, 13, 26) is None  # wide: another round
    assert plan.stop_reason(d, tight, 6, 12) is None  # fewer than warm-up + repeats


def test_with_every_pair_compared_the_rule_waits_for_the_pairs_too():
    """`--baseline all` (the nchc2019-runtimes preset): the report holds singularity over
    docker in the family, so the stop rule waits for that pair and for the wider
    Bonferroni level of three comparisons, not two."""
    rng, recs = random.Random(1), []
    for r in range(12):
        for i, rt in enumerate(("native", "docker", "singularity")):
            rate = 1000 * math.exp(rng.gauss(0, 0.02))
            recs.append(record(rt, rate, repeat=r, index=3 * r + i, wall_s=2.0))
    recs = typed(recs)
    arms = ["native", "docker", "singularity"]

    def why(baseline):
        target = plan.Target(0.0195, 3600, 0.95, baseline)
        return plan.stop_reason(plan.Design(arms, [CONFIG], 6, 1, 0, target), recs, 13, 78)

    assert why("native") == (
        "precision ±1.9% reached after 13 rounds (docker ±1.2%, singularity ±1.9%)"
    )
    assert why("all") is None  # the same trials: singularity ±2.0 %, the pair ±2.8 %
    d = plan.Design(arms, [CONFIG], 6, 1, 0, plan.Target(0.0195, 1, 0.95, "all"))
    assert plan.stop_reason(d, recs, 13, 78).endswith(
        "(docker ±1.3%, singularity ±2.0%, singularity/docker ±2.8%)"
    )


def test_stops_when_the_next_round_would_overrun_the_budget():
    d = design(plan.Target(0.02, 100))
    noisy = rounds_of(random.Random(1), 12, 0.10, wall=4.0)
    assert plan.stop_reason(d, noisy, 12, 91) is None  # 91 s spent, 7.6 s a round: one more
    assert plan.stop_reason(d, noisy, 12, 93).startswith(  # 7.75 s a round: over 100 s
        "budget 1.67 min spent after 12 rounds, precision ±2.0% not reached (docker ±"
    )


def test_the_budget_is_kept_before_the_first_rounds_are_done():
    """A campaign whose rounds take longer than its budget allows for its first rounds
    stops within one round of the budget all the same (the first rounds are 7 here)."""
    d = design(plan.Target(0.02, 100))
    slow = rounds_of(random.Random(1), 3, 0.10, wall=15.0)
    assert plan.stop_reason(d, slow, 2, 60) is None  # 30 s a round: 90 s after the next
    assert plan.stop_reason(d, slow, 3, 90).startswith("budget 1.67 min spent after 3 rounds")


def test_a_comparison_short_of_rounds_is_said_to_be_so_not_given_a_width():
    """Two rounds' range is no interval: the stop line says too few, never ±0.0 %."""
    d = design(plan.Target(0.02, 100))
    slow = rounds_of(random.Random(1), 2, 0.10, wall=40.0)
    why = plan.stop_reason(d, slow, 2, 80)
    assert why.endswith("precision ±2.0% not reached (docker too few trials (need 3))"), why


def test_rounds_are_seeded_per_round_and_indexed_by_position():
    d = design()
    assert d.round(3) == design().round(3)
    assert {p.runtime for p in d.round(0)} == {"native", "docker"} and d.round(0)[0].warmup
    assert not d.round(1)[0].warmup and d.round(1)[0].repeat == 0
    assert d.trials() == [p for r in range(7) for p in d.round(r)]


@pytest.mark.parametrize(
    ("text", "value"), [("2%", 0.02), ("0.5 %", 0.005), ("0.02", 0.02), ("99%", 0.99)]
)
def test_percent(text, value):
    assert units.percent("--precision", text) == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "value"), [("30m", 1800), ("90s", 90), ("1.5h", 5400), ("600", 600), ("2min", 120)]
)
def test_duration(text, value):
    assert units.duration("--budget", text) == value


@given(st.text(max_size=12))
def test_number_parsers_give_a_value_or_a_kit_error(text):
    for parse, low, high in ((units.percent, 0, 1), (units.duration, 0, math.inf)):
        try:
            value = parse("--x", text)
        except KitError as e:
            assert str(e).startswith(f"--x '{text}' must be")
        else:
            assert low < value < high


def test_a_budget_is_said_as_it_was_given():
    said = [units.minutes(units.duration("--budget", t)) for t in ("90s", "20m", "100", "24h")]
    assert said == ["1.5 min", "20 min", "1.67 min", "1440 min"]


def test_launch_spread_is_measured_from_the_warm_up_launches():
    """Two warm-up rounds of three arms at log rates about each round's mean of -0.1, 0 and
    +0.1: pooled SD sqrt(4 x 0.01 / 4) = 10 %; one launch a round and arm is 6 launches.
    With one round of two arms (one degree of freedom) the spread is assumed."""
    warm = [
        record(rt, 1000 * math.exp(drift + off), repeat=r, warmup=True)
        for r, drift in ((-2, 0.3), (-1, -0.2))
        for rt, off in (("native", -0.1), ("docker", 0.0), ("podman", 0.1))
    ]
    spread, whence = plan.launch_spread(typed(warm))
    assert spread == pytest.approx(0.10) and whence == "measured over 6 warm-up launches"
    assert plan.launch_spread(typed(warm[:2])) == (0.05, "assumed")


def test_a_budget_too_short_for_an_interval_is_said_with_the_budget_that_would():
    """An interval needs 3 rounds (stats.MIN_ROUNDS); 100 s with a 40 s warm-up round buys
    1 more: the line says so, and what would buy 3 (40 + 4 x 40 s = 3.3 min)."""
    arms = ["native", "docker", "podman", "singularity", "charliecloud"]
    d = plan.Design(arms, [CONFIG], 6, 1, 0, plan.Target(0.02, 100))
    assert plan.comparisons(d) == 4 and stats.MIN_ROUNDS == 3
    assert plan.short_budget(d, 40, 1) == (
        "the budget 1.67 min buys about 1 rounds at 40 s a round; an interval at 95% for all "
        "4 comparisons needs at least 3: --budget 4m would buy them (shorter intervals are "
        "marked †)"
    )
    roomy = plan.Design(arms, [CONFIG], 6, 1, 0, plan.Target(0.02, 600))
    assert plan.short_budget(roomy, 40, 1) == ""
    assert plan.short_budget(plan.Design(arms, [CONFIG], 6, 1, 0), 40, 1) == ""


def test_the_end_is_estimated_from_the_spread_and_the_rate_of_the_rounds_so_far():
    """Time left: the rounds the widest comparison needs at this spread, at the rate the
    rounds ran, never past the budget; nothing before the first rounds give a spread."""
    d = design(plan.Target(0.01, 36_000), repeats=3, warmups=1)
    noisy = rounds_of(random.Random(1), 7, 0.05)
    assert plan.seconds_left(design(), noisy, 7, 70.0) is None  # a fixed design: a bar
    assert plan.seconds_left(d, noisy[:6], 3, 30.0) is None  # two measured rounds
    left = plan.seconds_left(d, noisy, 7, 70.0)  # 10 s a round
    assert left > 0 and left % 10 == 0  # whole rounds at the measured rate
    quiet = plan.seconds_left(d, rounds_of(random.Random(1), 7, 0.01), 7, 70.0)
    assert quiet < left  # a smaller spread needs fewer rounds
    assert plan.seconds_left(d, noisy, 7, 140.0) == 2 * left  # twice as long a round
    assert plan.seconds_left(dataclasses_replace(d, 0.5), noisy, 7, 70.0) == 0  # reached
    short = design(plan.Target(0.01, 100), repeats=3, warmups=1)
    assert plan.seconds_left(short, noisy, 7, 70.0) == 30  # the budget's end comes first


def dataclasses_replace(d: plan.Design, precision: float) -> plan.Design:
    return plan.Design(d.runtimes, d.configs, d.repeats, d.warmups, d.seed,
                       plan.Target(precision, d.target.budget_s))  # fmt: skip


def test_a_precision_campaigns_line_says_its_end(capsys):
    from kit.run import progress

    (t,) = rounds_of(random.Random(0), 1, 0.01)[:1]
    progress.say(5, None, t, 75.0, 2, 600.0)
    assert capsys.readouterr().err.endswith(
        "; 1 min 15 s, about 10 min left at the spread so far\n"
    )
    progress.say(5, None, t, 75.0, 2)
    assert capsys.readouterr().err.endswith("; 1 min 15 s\n")
