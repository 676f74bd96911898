"""The report's verdicts hold together, at the report's own settings, where a runtime is
the one to blame: simulated campaigns through the real loop (campaign.execute, its
records, the analysis) of native and four containers (four comparisons, Bonferroni, 95 %
for all four), at the demo's 10 and 20 rounds, where one container is slower in 30 % of
its launches (a cold page cache, a slow start), one is five times noisier, launches are
skewed, the noise is real (resampled from the shipped campaigns), or another job loads
the machine and the trials record it. Both ways: another job's load recorded on one arm's
slow launches only (the arm costs nothing: truth 1; with native alone too), and a runtime
whose own helper burns a fifth of the machine in some of its launches and slows them (its
cost: the records carry the helper's CPU as the runtime's, through hostload.during).

The truth of a comparison is the geometric mean of its arm's throughput over native's:
an intermittent cost counts at its full share. Family-wise coverage is the share of
campaigns whose four intervals all hold their truths. KIT_SIM_RUNS=2000 runs the same
code for docs/statistics.md's table (pytest -s prints its rows).
"""

import math
import os
import random
import shutil
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kit.across import compare
from kit.analysis import stats, summary
from kit.launch import hostload
from kit.results.record import Trial
from kit.run import plan

from . import test_coverage as coverage
from .test_coverage import RESIDUALS, folders  # noqa: F401 (a fixture)

RUNS = int(os.environ.get("KIT_SIM_RUNS", "60"))
ARMS = ["native", "docker", "podman", "singularity", "charliecloud"]
CONFIG = plan.Config("torch-cnn", "resnet50", 4, 1)
LAUNCH_SD = 0.04
DURING = hostload.during  # the real one: the campaign's trials see the scripted one


@dataclass(frozen=True)
class Scenario:
    """Each launch's log figure: the arm's noise, its intermittent slowness (chance, factor)
    on the arm that has it, and rounds another job loads (chance), with that load in the
    loaded launches' records. What the slow launches' records carry (recorded): nothing
    (the arm's own cost), "load" (another job's CPU, 20-36 % of the machine: not the arm's
    cost, truth 1) or "helper" (its runtime's helper, 20 %: its cost). arms: the campaign's
    (native first)."""

    noise: Callable[[random.Random, str], float]
    slow_arm: str = ""
    slow_chance: float = 0.0
    slow_factor: float = 1.0
    load_chance: float = 0.0
    recorded: str = ""
    arms: tuple[str, ...] = tuple(ARMS)

    def truth(self, arm: str) -> float:
        """The geometric mean of the arm's throughput over native's."""
        if arm != self.slow_arm or self.recorded == "load":
            return 1.0
        return math.exp(-self.slow_chance * math.log(self.slow_factor))


class Launcher(coverage.Simulated):
    """Launches a scenario scripts, each with the host record kit would make of it
    (hostload.during over a scripted window): the benchmark's CPU half the machine, 1 %
    other CPU, and on a slow launch what the scenario records of it."""

    def __init__(self, scenario: Scenario, hit_chance: float, truth: dict, seed: int):
        super().__init__(self.draw, hit_chance, truth, seed)
        self.scenario, self.slow = scenario, False

    def draw(self, rng: random.Random, arm: str, hit: bool) -> float:
        """One launch's log figure before drift and load (Simulated adds them)."""
        s = self.scenario
        self.slow = arm == s.slow_arm and rng.random() < s.slow_chance
        return s.noise(rng, arm) - (math.log(s.slow_factor) if self.slow else 0.0)

    def host_load(self, *_args, **_kw) -> dict:
        other, helper = (40.0 if self.loaded else 1.0), 0.0
        if self.slow and self.scenario.recorded == "load":
            other = max(other, self.rng.uniform(20, 36))
        elif self.slow and self.scenario.recorded == "helper":
            helper = 20.0
        machine = 10.0 * (os.cpu_count() or 1)  # CPU seconds of a 10 s trial
        own, helper_s = machine * 0.5, machine * helper / 100
        busy = own + helper_s + machine * other / 100
        return DURING(2.0, hostload.Window(10.0, busy, 0.0, own, helper_s), True)


def normal(sd: float = LAUNCH_SD) -> Callable[[random.Random, str], float]:
    return lambda rng, arm: rng.gauss(0, sd)


def noisier(rng: random.Random, arm: str) -> float:
    return rng.gauss(0, 5 * LAUNCH_SD if arm == "podman" else LAUNCH_SD)


SCENARIOS = {
    "real launches": Scenario(lambda rng, arm: rng.choice(RESIDUALS)),
    "normal 4 %": Scenario(normal()),
    "docker 1.35x slower in 30 % of launches": Scenario(normal(), "docker", 0.3, 1.35),
    "docker 1.5x slower in 30 % of launches": Scenario(normal(), "docker", 0.3, 1.5),
    "docker 2x slower in 30 % of launches": Scenario(normal(), "docker", 0.3, 2.0),
    "podman 5x noisier": Scenario(noisier),
    "skewed (slow tail)": Scenario(lambda rng, arm: 0.04 - rng.expovariate(25)),
    "outside load, recorded": Scenario(normal(), load_chance=0.15),
}
BOTH_WAYS = {  # (scenario, arms)
    (f"load recorded on docker's {f}x slower launches (30 %)", len(arms)): Scenario(
        normal(), "docker", 0.3, f, recorded="load", arms=arms
    )
    for f in (1.35, 1.5, 2.0)
    for arms in (("native", "docker"), tuple(ARMS))
} | {
    ("docker's helper at 20 % of the machine, 1.5x slower (30 %)", len(arms)): Scenario(
        normal(), "docker", 0.3, 1.5, recorded="helper", arms=arms
    )
    for arms in (("native", "docker"), tuple(ARMS))
}


def simulate(folder: Path, scenario: Scenario, seed: int, rounds: int) -> list[Trial]:
    """One campaign of `rounds` rounds (native once a round, as the demo) through
    campaign.execute; its records."""
    truth = dict.fromkeys(scenario.arms, 1.0)
    hit = scenario.load_chance
    return coverage.simulate(folder, (scenario, hit), truth, seed, rounds, None, 1, Launcher)


def family_coverage(
    records: list[Trial], scenario: Scenario, rounds: int
) -> tuple[bool, dict[str, str]]:
    """Whether all the intervals over the first `rounds` rounds hold their truths, and
    each comparison's verdict."""
    a = summary.summarise([t for t in records if t.repeat < rounds], "", 0.95)
    arms = {x.runtime: x for x in a.groups[0].arms[1:]}
    held = all(x.ratio.low <= scenario.truth(rt) <= x.ratio.high for rt, x in arms.items())
    return held, {rt: x.verdict for rt, x in arms.items()}


def table(runs: int, root: Path, scenarios: dict) -> Iterator[tuple[object, int, float, float]]:
    """(scenario's name, rounds, family-wise coverage, share of campaigns calling docker
    slower)."""
    for name, scenario in scenarios.items():
        held: dict[int, list[bool]] = {10: [], 20: []}
        slower: dict[int, list[bool]] = {10: [], 20: []}
        for k in range(runs):
            folder = root / "campaign"
            records = simulate(folder, scenario, 7919 * k + 17, 20)
            shutil.rmtree(folder)  # thousands of campaigns in memory otherwise
            for n in held:
                ok, verdicts = family_coverage(records, scenario, n)
                held[n].append(ok)
                slower[n].append(verdicts["docker"] == "slower")
        for n in held:
            yield name, n, statistics.fmean(held[n]), statistics.fmean(slower[n])


def test_verdicts_hold_together_where_one_runtime_is_to_blame(folders):  # noqa: F811
    """At RUNS campaigns a scenario, each family-wise coverage is at least 0.93 less the
    simulation's error (2.5 of its standard errors); the report's larger run
    (docs/statistics.md, 2,000 a cell) holds the 0.93 itself."""
    for name, n, held, slower in table(RUNS, folders, SCENARIOS):
        print(f"| {name} | {n} | {held:.3f} | {slower:.3f} |")
        slack = 2.5 * math.sqrt(0.93 * 0.07 / RUNS)
        assert held >= 0.93 - slack, f"{name}, {n} rounds: family-wise {held:.3f}"


def test_verdicts_hold_both_ways_whoever_is_to_blame(folders):  # noqa: F811
    """Another job's load recorded on one arm's slow launches only (the arm costs nothing),
    and a runtime whose helper's work slows some of its launches (its cost), with two arms
    and with five: each family-wise coverage at least 0.93 less the simulation's error,
    and docker called "slower" where it costs nothing in at most 5 % of campaigns (give or
    take that error); docs/statistics.md's table holds both at 2,000 campaigns a cell."""
    for (name, arms), n, held, slower in table(RUNS, folders, BOTH_WAYS):
        print(f"| {name} | {arms} | {n} | {held:.3f} | {slower:.3f} |")
        slack = 2.5 * math.sqrt(0.93 * 0.07 / RUNS)
        assert held >= 0.93 - slack, f"{name}, {arms} arms, {n} rounds: {held:.3f}"
        if BOTH_WAYS[name, arms].recorded == "load":
            assert slower <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / RUNS), (name, arms, n)


def test_a_slow_launch_without_evidence_stays_in_and_is_named(folders):  # noqa: F811
    """docker 2x slower in 30 % of its launches: none left out (no load recorded), each
    named as docker's own, and at 20 rounds its ratio is about the geometric mean."""
    scenario = SCENARIOS["docker 2x slower in 30 % of launches"]
    records = simulate(folders / "c", scenario, 5, 20)
    a = summary.summarise(records, "", 0.95)
    arms = {x.runtime: x for x in a.groups[0].arms}
    assert all(not x.disturbed for x in arms.values())
    assert arms["docker"].slow and all(not arms[rt].slow for rt in ARMS if rt != "docker")
    assert arms["docker"].ratio.low <= scenario.truth("docker") <= arms["docker"].ratio.high


def test_loaded_launches_with_evidence_are_left_out_and_the_verdict_holds_both_ways(
    folders,  # noqa: F811
):
    """Another job loads some rounds, and the records say so: those launches are left out
    and named with their evidence, and each ratio is also given with every launch."""
    scenario = SCENARIOS["outside load, recorded"]
    records = simulate(folders / "c", scenario, 3, 20)
    a = summary.summarise(records, "", 0.95)
    left = [(x.runtime, i, why) for x in a.groups[0].arms for i, why in zip(x.disturbed,
            x.evidence, strict=True)]  # fmt: skip
    assert left and all(why == "other CPU 40 % of the machine" for _, _, why in left)
    loaded = {t.index for t in records if t.host_load["other_cpu_pct"] > 10}
    assert {i for _, i, _ in left} <= loaded
    assert all(x.ratio_all is not None for x in a.groups[0].arms[1:])


def test_the_ci_campaigns_assertions_hold_at_999_in_1000():
    """The integration suite's real campaign (tests/integration/test_campaign_stats.py):
    native, native@b and docker under a quarter of a core, 16 rounds, two comparisons. On
    launches as noisy as any seen here (20 % a launch, and one in ten slowed 2-7x by
    something nothing recorded), through the functions the analysis calls:
    - the A/A interval at 99.9 % (each 99.95 %) misses 1 in at most 1 of 1000 campaigns;
    - the cut (truly 0.25) is 'slower' with its estimate in (0.08, 0.7) in at least 999 of
      1000, with only 14 of the 16 rounds left (two lost to recorded load). At half a core
      (0.5) it was missed in 18 % of such campaigns: one slow native launch in a round
      reads as a fast cut."""
    rng = random.Random(2026)

    def launch() -> float:
        wild = -math.log(rng.uniform(2, 7)) if rng.random() < 0.1 else 0.0
        return rng.gauss(0, 0.2) + wild

    runs, aa_false, cut_missed = 20_000, 0, 0
    each_aa, each = stats.family_confidence(0.999, 2), stats.family_confidence(0.95, 2)
    for _ in range(runs):
        native = [launch() for _ in range(16)]
        aa = stats.paired_ratio([(math.exp(launch()), math.exp(x)) for x in native], each_aa)
        aa_false += stats.verdict(aa) != "no significant difference"
        cut = [(0.25 * math.exp(launch()), math.exp(x)) for x in native[:14]]
        iv = stats.paired_ratio(cut, each)
        cut_missed += not (stats.verdict(iv) == "slower" and 0.08 < iv.value < 0.7)
    print(f"A/A false alarms {aa_false} of {runs}; cut missed {cut_missed} of {runs}")
    assert aa_false / runs <= 0.001 + 2.5 * math.sqrt(0.001 * 0.999 / runs)
    assert cut_missed / runs <= 0.001


def test_the_ci_comparisons_assertions_hold_at_999_in_1000():
    """The integration suite's `kit compare` and `kit check` on its two real campaigns
    (tests/integration/test_campaign_stats.py): the cut one above (14 of 16 rounds left)
    and one of 8 rounds without the quota, on the same noisy launches, through the
    functions they call:
    - `kit check --max-overhead docker=5%` fails the cut campaign (its interval ends
      under 0.95) in at least 999 of 1000;
    - `kit compare` at 99.9 % (three comparisons) puts docker's growth (truly 4x) above
      1.3 and never calls it a fall, in at least 999 of 1000; its interval is too wide at
      8 rounds on such launches to exclude no change that surely (its low end fell under
      1 in about 1 in 100);
    - and calls no change of native@b, centred on 0 on both sides, in all but at most 1
      of 1000."""
    rng = random.Random(2027)

    def launch() -> float:
        wild = -math.log(rng.uniform(2, 7)) if rng.random() < 0.1 else 0.0
        return rng.gauss(0, 0.2) + wild

    runs, gate_missed, grown_missed, twin_false = 20_000, 0, 0, 0
    each = stats.family_confidence(0.95, 2)
    each_compare = stats.family_confidence(0.999, 3)
    for _ in range(runs):
        cut = [(0.25 * math.exp(launch()), math.exp(launch())) for _ in range(14)]
        gate_missed += not stats.paired_ratio(cut, each).high < 0.95
        before = [math.log(a / b) for a, b in cut]
        grown = compare.change(before, [launch() - launch() for _ in range(8)], each_compare)
        grown_missed += not (grown.value > 1.3 and not grown.high < 1)
        twin = compare.change(
            [launch() - launch() for _ in range(16)],
            [launch() - launch() for _ in range(8)],
            each_compare,
        )
        twin_false += compare.verdict(twin).startswith("changed by")
    print(f"gate missed {gate_missed}, growth missed {grown_missed}, twin false {twin_false}")
    assert gate_missed / runs <= 0.001
    assert grown_missed / runs <= 0.001
    assert twin_false / runs <= 0.001 + 2.5 * math.sqrt(0.001 * 0.999 / runs)
