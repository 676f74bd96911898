"""The host's load record: shares that mean something, and one definition of outside load."""

import os

import pytest

from kit.launch import hostload
from kit.launch.hostload import Window, during, outside_load


@pytest.fixture(autouse=True)
def two_cores(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)


def test_shares_are_of_the_machine_over_the_watched_window():
    load = during(0.5, Window(seconds=4.0, busy_s=6.0, steal_s=0.08, own_s=5.0), True)
    assert load == {
        "loadavg_1m": 0.5,
        "busy_cpu_pct": 75.0,
        "helper_cpu_pct": 0.0,
        "other_cpu_pct": 12.5,
        "steal_cpu_pct": 1.0,
        "window_s": 4.0,
    }


def test_the_runtimes_helpers_cpu_is_its_own_never_outside_load():
    """A runtime's helper (an engine, conmon, a FUSE daemon) burning a fifth of the machine
    during the trial: its share is recorded apart, and is no evidence of outside load."""
    window = Window(seconds=4.0, busy_s=5.0, steal_s=0.0, own_s=3.0, helper_s=1.6)
    load = during(0.5, window, True)
    assert (load["helper_cpu_pct"], load["other_cpu_pct"]) == (20.0, 5.0)
    assert outside_load(load) is None
    unattributed = during(0.5, Window(seconds=4.0, busy_s=5.0, own_s=3.0), True)
    assert outside_load(unattributed) == "other CPU 25 % of the machine"


def test_every_share_is_capped_to_0_100():
    load = during(None, Window(seconds=2.0, busy_s=9.0, steal_s=-1.0, own_s=0.0), True)
    assert (load["busy_cpu_pct"], load["other_cpu_pct"], load["steal_cpu_pct"]) == (100, 100, 0)
    mine_above_all = during(None, Window(seconds=2.0, busy_s=3.0, own_s=3.5), True)
    assert mine_above_all["other_cpu_pct"] == 0


def test_a_short_or_missing_watch_gives_no_share():
    short = during(1.0, Window(seconds=hostload.MIN_WINDOW_S - 0.01, busy_s=9.0), True)
    assert short == {
        "loadavg_1m": 1.0,
        "busy_cpu_pct": None,
        "helper_cpu_pct": None,
        "other_cpu_pct": None,
        "steal_cpu_pct": None,
        "window_s": 0.99,
    }
    unwatched = during(1.0, None, True)  # a Slurm job
    assert [unwatched[k] for k in ("busy_cpu_pct", "other_cpu_pct", "window_s")] == [None] * 3
    enough = during(1.0, Window(seconds=hostload.MIN_WINDOW_S, busy_s=1.0), True)
    assert enough["other_cpu_pct"] == 50.0


def test_ranks_on_other_hosts_have_no_other_share_here():
    load = during(1.0, Window(seconds=4.0, busy_s=6.0, own_s=1.0), ranks_here=False)
    assert load["busy_cpu_pct"] == 75.0 and load["other_cpu_pct"] is None


def test_outside_load_from_the_thresholds_up():
    other, steal = hostload.OTHER_CPU_EVIDENCE_PCT, hostload.STEAL_EVIDENCE_PCT
    assert outside_load({"other_cpu_pct": other, "steal_cpu_pct": 0.0}) == (
        "other CPU 10 % of the machine"
    )
    assert outside_load({"other_cpu_pct": 43.2}) == "other CPU 43 % of the machine"
    assert outside_load({"other_cpu_pct": other - 0.1, "steal_cpu_pct": steal - 0.1}) is None
    assert outside_load({"other_cpu_pct": 1.3, "steal_cpu_pct": steal}) == "steal 10 %"
    assert outside_load({"other_cpu_pct": 20, "steal_cpu_pct": 12.0}) == (
        "other CPU 20 % of the machine; steal 12 %"
    )


def test_no_measure_is_no_evidence():
    assert outside_load(None) is None
    assert outside_load({}) is None
    assert outside_load({"other_cpu_pct": None, "steal_cpu_pct": None, "busy_cpu_pct": 99}) is None
    # what records from before the shares were capped hold over a 3 ms trial
    assert outside_load({"busy_cpu_pct": 1613.0, "other_cpu_pct": 1595.0}) is None
    assert outside_load({"other_cpu_pct": True}) is None


def test_a_recorded_quiet_and_loaded_trial():
    """Two native trials of aa-and-cut-under-load.jsonl: 9.4 images/s, and 1.7 while
    another job ran."""
    quiet = {"loadavg_1m": 2.0, "busy_cpu_pct": 86.4, "other_cpu_pct": 1.3, "steal_cpu_pct": 0.0}
    loaded = {**quiet, "busy_cpu_pct": 99.3, "other_cpu_pct": 43.9}
    assert outside_load(quiet) is None
    assert outside_load(loaded) == "other CPU 44 % of the machine"
