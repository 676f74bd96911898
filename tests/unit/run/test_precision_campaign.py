"""Precision-targeted campaigns: rounds, the stopping rule and its budget; number parsing."""

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kit.core import units
from kit.core.errors import KitError
from kit.run import plan

from ..records import record

CONFIG = plan.Config("torch-cnn", "tiny", 32, 1)


def design(target=None, repeats=6, warmups=1):
    return plan.Design(["native", "docker"], [CONFIG], repeats, warmups, 0, target)


def rounds_of(rng, n, spread, ratio=1.0, wall=2.0):
    out = []
    for r in range(n):
        for rt, scale in (("native", 1.0), ("docker", ratio)):
            rate = 1000 * scale * math.exp(rng.gauss(0, spread))
            out.append(record(rt, rate, repeat=r, index=2 * r, wall_s=wall))
    return out


def test_a_fixed_design_stops_after_its_rounds():
    d = design()
    assert plan.stop_reason(d, [], 6) is None
    assert plan.stop_reason(d, [], 7) == ""


def test_stops_when_every_comparison_is_precise_enough():
    d = design(plan.Target(0.02, 3600))
    tight = rounds_of(random.Random(1), 12, 0.002)
    why = plan.stop_reason(d, tight, 13)
    assert why.startswith("precision ±2.0% reached after 13 rounds (docker ±")
    noisy = rounds_of(random.Random(1), 12, 0.10)
    assert plan.stop_reason(d, noisy, 13) is None  # wide: another round
    assert plan.stop_reason(d, tight, 6) is None  # fewer than warm-up + repeats


def test_with_every_pair_compared_the_rule_waits_for_the_pairs_too():
    """`--baseline all` (the nchc2019-runtimes preset): the report holds singularity over
    docker in the family, so the stop rule waits for that pair and for the wider
    Bonferroni level of three comparisons, not two."""
    rng, recs = random.Random(1), []
    for r in range(12):
        for i, rt in enumerate(("native", "docker", "singularity")):
            rate = 1000 * math.exp(rng.gauss(0, 0.02))
            recs.append(record(rt, rate, repeat=r, index=3 * r + i, wall_s=2.0))
    arms = ["native", "docker", "singularity"]

    def why(baseline):
        target = plan.Target(0.0195, 3600, 0.95, baseline)
        return plan.stop_reason(plan.Design(arms, [CONFIG], 6, 1, 0, target), recs, 13)

    assert why("native") == (
        "precision ±1.9% reached after 13 rounds (docker ±1.2%, singularity ±1.9%)"
    )
    assert why("all") is None  # the same trials: singularity ±2.0 %, the pair ±2.8 %
    d = plan.Design(arms, [CONFIG], 6, 1, 0, plan.Target(0.0195, 1, 0.95, "all"))
    assert plan.stop_reason(d, recs, 13).endswith(
        "(docker ±1.2%, singularity ±2.0%, singularity/docker ±2.8%)"
    )


def test_stops_when_the_next_round_would_overrun_the_budget():
    d = design(plan.Target(0.02, 100))
    noisy = rounds_of(random.Random(1), 12, 0.10, wall=4.0)  # 96 s spent, 8 s a round
    assert plan.stop_reason(d, noisy, 12).startswith(
        "budget 1.67 min spent after 12 rounds, precision ±2.0% not reached (docker ±"
    )


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
