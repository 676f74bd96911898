"""What precision costs and what a spread allows (results/precision.py)."""

import math
import random
import re

import pytest

from kit.analysis import precision, stats, summary
from kit.report import writers
from kit.results import store

from ..records import record, typed


def test_allowed_is_the_t_half_width_at_the_spread_a_round_of_launches_gives():
    s, n, conf = 0.1, 20, 0.9875
    want = math.expm1(stats.t_quantile(0.5 + conf / 2, n - 1) * s * math.sqrt(2) / math.sqrt(n))
    assert precision.allowed(s, n, conf) == pytest.approx(want)
    # a baseline run twice a round: its mean varies less, so the ratio's round does too
    twice = math.expm1(stats.t_quantile(0.5 + conf / 2, n - 1) * s * math.sqrt(1.5) / math.sqrt(n))
    assert precision.allowed(s, n, conf, baseline_launches=2) == pytest.approx(twice)


@pytest.mark.parametrize(
    ("rounds", "own", "spread"),
    [(0, 0.1, 0.1), (2, 0.1, 0.1), (9, None, 0.1), (9, 0.1, None)],
)  # unpaired, too few rounds, no own spread, no launch spread
def test_no_allowance_where_it_cannot_be_judged(rounds, own, spread):
    assert precision.allowance(0.05, rounds, 1.0, 0.95, own, spread) is None


def test_the_allowance_takes_the_rounds_and_the_baselines_launches_a_round():
    a = precision.allowance(0.05, 12, 2.0, 0.95, 0.2, 0.1)
    assert a is not None
    assert a.factor == pytest.approx(0.05 / precision.allowed(0.1, 12, 0.95, 2))
    assert a.expected == pytest.approx(0.1 * math.sqrt(1.5))
    assert a.own == 0.2


def test_an_arm_carries_the_rounds_and_launches_its_ratio_paired():
    records = []
    for k in range(5):
        records += [record("native", 100.0 + k, repeat=k, index=3 * k),
                    record("native", 101.0 + k, repeat=k, index=3 * k + 1),
                    record("docker", 99.0 + k, repeat=k, index=3 * k + 2)]  # fmt: skip
    (group,) = summary.summarise(typed(records), "c").groups
    docker = next(a for a in group.arms if a.runtime == "docker")
    assert (docker.rounds, docker.baseline_launches) == (5, 2.0)
    assert docker.method == "paired (5 rounds, native x2 a round)"


def campaign(rounds: int, noisy: float, seed: int = 7) -> list[dict]:
    """Native and two containers, interleaved by round, launches 5 % apart; `noisy` is
    docker's own extra launch noise."""
    rng = random.Random(seed)
    out = []
    for k in range(rounds):
        drift = rng.gauss(0, 0.03)
        for i, (rt, extra) in enumerate((("native", 0), ("podman", 0), ("docker", noisy))):
            rate = 10 * math.exp(drift + rng.gauss(0, 0.05) + rng.gauss(0, extra) if extra else
                                 drift + rng.gauss(0, 0.05))  # fmt: skip
            out.append(record(rt, rate, repeat=k, index=3 * k + i))
    return out


def spread_line(tmp_path, noisy: float) -> str:
    for r in campaign(30, noisy):
        store.append(tmp_path, r)
    text = writers.render(summary.analyse([tmp_path]), "md")
    (line,) = [x for x in text.splitlines() if x.startswith("Spread of one trial")]
    return line


def test_the_report_names_the_arm_whose_rounds_vary_more_than_the_launches_predict(tmp_path):
    line = spread_line(tmp_path, noisy=0.2)
    factors = dict(re.findall(r"(\w+) (\d+\.\d\d)x", line))
    assert set(factors) == {"docker", "podman"}
    assert float(factors["docker"]) > 1.25 * float(factors["podman"])
    own = line.split("the arm's own variation: ")[1]
    assert own.startswith("docker ±") and "podman" not in own


def test_arms_as_noisy_as_the_launches_are_not_named(tmp_path):
    line = spread_line(tmp_path, noisy=0.0)
    assert "width over the width that allows in its rounds: docker" in line
    assert "own variation" not in line
