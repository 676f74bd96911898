"""The load screen: a launch is left out on its own record's evidence of outside load,
each alike, never by how its arm's other launches ran; every loaded launch is named."""

import math
import random

from kit.analysis import summary
from kit.analysis.screen import screen
from kit.report import sentences

from ..records import record, typed

QUIET = {"other_cpu_pct": 1.5, "steal_cpu_pct": 0.0}


def campaign(rounds: int, loaded: dict[str, dict[int, float]]) -> list:
    """native and docker once a round, 3 % apart; loaded: per arm, round -> the slowdown
    another job caused in that round's launch, whose record shows 20-36 % other CPU."""
    rng, out = random.Random(1), []
    for r in range(rounds):
        for arm in ("native", "docker"):
            slow = loaded.get(arm, {}).get(r)
            load = QUIET if slow is None else {"other_cpu_pct": 20 + r, "steal_cpu_pct": 0.0}
            rate = 10 * math.exp(rng.gauss(0, 0.03)) / (slow or 1)
            i = len(out)
            out.append(record(arm, rate, index=i, repeat=r, host_load=load))
    return typed(out)


def test_every_loaded_launch_is_left_out_however_it_ran_and_its_arm_ran():
    """Half of docker's launches carry another job's load, most of them slowed (its arm's
    median and fit move with them) and one not slowed at all: all are left out alike,
    each with its evidence; quiet launches all stay."""
    loaded = {"docker": {0: 1.35, 2: 1.35, 4: 1.35, 6: 1.35, 8: 1.0}}
    trials = campaign(10, loaded)
    sc = screen({rt: [t for t in trials if t.runtime == rt] for rt in ("native", "docker")})
    assert sc.left["docker"] == [2 * r + 1 for r in loaded["docker"]]
    assert sc.evidence["docker"] == [
        f"other CPU {20 + r} % of the machine" for r in loaded["docker"]
    ]
    assert sc.left["native"] == [] and len(sc.kept["native"]) == 10
    assert len(sc.kept["docker"]) == 5 and not sc.loaded_kept["docker"]


def test_the_report_names_every_loaded_launch_and_the_verdict_does_not_blame_the_arm():
    """With the loaded launches out, docker (which costs nothing) is not called slower;
    the report names each loaded launch with its evidence, and gives the ratio with every
    launch kept."""
    loaded = {"docker": {r: 1.35 for r in range(0, 20, 3)}}
    a = summary.summarise(campaign(20, loaded), "", 0.95)
    g = a.groups[0]
    docker = g.arms[1]
    assert docker.verdict == "no significant difference"
    said = sentences.disturbed(g)
    for r in loaded["docker"]:
        assert f"#{2 * r + 1} (other CPU {20 + r} % of the machine)" in said
    assert "With every launch kept: docker" in said


def test_an_arm_whose_every_launch_is_loaded_keeps_them_and_names_them():
    """Nothing of the arm would be left to compare: its launches stay, named as loaded."""
    loaded = {"native": dict.fromkeys(range(6), 1.0)}
    trials = campaign(6, loaded)
    a = summary.summarise(trials, "", 0.95)
    native = a.groups[0].arms[0]
    assert native.disturbed == [] and native.loaded_kept == [2 * r for r in range(6)]
    assert native.kept_evidence[0] == "other CPU 20 % of the machine"
    said = sentences.disturbed(a.groups[0])
    assert said.startswith("Kept although their record shows outside load")
    assert "native #0 (other CPU 20 % of the machine), #2 (" in said
