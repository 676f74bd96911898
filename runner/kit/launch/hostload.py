"""What the host was doing during a trial: load average, other processes' CPU, steal.

A trial's figure can be off because a neighbour was busy; recording the host's
activity beside every trial lets a reader see that, and lets the analysis tell a
launch slowed by outside load (outside_load) from one slow on its own account.
Read from /proc (Linux): the whole machine's CPU time (/proc/stat), minus what the
trial's own processes used, which the trial's process watch (proctree.Tree) counts
for every runtime, a container's ranks included, over the same instants, and minus
what its runtime's helpers used (an engine, a shim, conmon, a FUSE or user-mode network
daemon: Runtime.helpers), which do the runtime's work for the trial and are its cost,
never outside load.
"""

import os
import time
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
# Below this much watched time a share is not given: /proc/stat counts in ticks of 10 ms
# a CPU, each process's counters lose up to a tick at every read, and the watch looks
# every 0.25 s; over 1 s of a 2-core machine (200 ticks) a handful of processes can be off
# by a few per cent, over less by more.
MIN_WINDOW_S = 1.0
# Evidence of outside load from this share up (outside_load says why these figures)
OTHER_CPU_EVIDENCE_PCT = 10.0
STEAL_EVIDENCE_PCT = 10.0


@dataclass(frozen=True)
class Cpu:
    """The whole machine's CPU time so far, and when it was read (time.monotonic)."""

    at: float
    busy_s: float  # every process on the host (user, nice, system, irq, softirq)
    steal_s: float  # what the hypervisor gave to other guests


def cpu() -> Cpu:
    """The machine's CPU time now (/proc/stat's first line; zeros where unreadable)."""
    try:
        with open("/proc/stat", "rb") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        ticks = []
    ticks += [0] * (8 - len(ticks))
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return Cpu(time.monotonic(), (user + nice + system + irq + softirq) / TICK, steal / TICK)


@dataclass(frozen=True)
class Window:
    """CPU seconds over the watched part of a trial (proctree.Tree says which part): its
    length, the whole machine's busy and steal time, the trial's own processes' (its
    runtime's helpers' apart) and its runtime's helpers'."""

    seconds: float = 0.0
    busy_s: float = 0.0
    steal_s: float = 0.0
    own_s: float = 0.0
    helper_s: float = 0.0

    def plus(self, start: Cpu, end: Cpu, own_s: float, helper_s: float = 0.0) -> "Window":
        """This window and one more stretch, from start to end."""
        return Window(
            self.seconds + end.at - start.at,
            self.busy_s + end.busy_s - start.busy_s,
            self.steal_s + end.steal_s - start.steal_s,
            self.own_s + own_s,
            self.helper_s + helper_s,
        )


def loadavg() -> float | None:
    """The 1-minute load average, or None where /proc/loadavg cannot be read."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _pct(seconds: float, window: Window, digits: int) -> float:
    """A share of the machine's CPU time over the window, within [0, 100]."""
    capacity = window.seconds * (os.cpu_count() or 1)
    return round(min(max(100 * seconds / capacity, 0.0), 100.0), digits)


def during(loadavg_1m: float | None, window: Window | None, ranks_here: bool) -> dict:
    """The host's activity over one trial, in per cent of the machine's CPU time, over
    the window its processes were watched (window_s; shares are None below MIN_WINDOW_S
    or with no watch, as for a Slurm job): every process's (busy), its runtime's helpers'
    (helper), and the rest's but the trial's own (other). `ranks_here`: the trial's ranks
    ran on this host. Ranks on other hosts (Slurm, --hosts) are not told apart from this
    host's load, and this host's load says nothing of theirs: other_cpu_pct is None for
    them."""
    measured = window is not None and window.seconds >= MIN_WINDOW_S
    here = measured and ranks_here
    return {
        "loadavg_1m": loadavg_1m,
        "busy_cpu_pct": _pct(window.busy_s, window, 1) if measured else None,
        "helper_cpu_pct": _pct(window.helper_s, window, 1) if measured else None,
        "other_cpu_pct": (
            _pct(window.busy_s - window.own_s - window.helper_s, window, 1) if here else None
        ),
        "steal_cpu_pct": _pct(window.steal_s, window, 2) if measured else None,
        "window_s": round(window.seconds, 2) if window else None,
    }


def _share(value: object) -> float | None:
    """A recorded share that is one: a number within [0, 100]. Records written before
    shares were capped hold impossible ones (1595 % over a 3 ms trial): not evidence."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value <= 100 else None


def outside_load(host_load: dict | None) -> str | None:
    """Why a trial's record shows evidence of outside load (other processes used at least
    OTHER_CPU_EVIDENCE_PCT of the machine, or the hypervisor took at least
    STEAL_EVIDENCE_PCT), in a few words; None when it shows none, or was not measured.

    The 10 % are measured on this project's 2-core VMs (../shared/data/campaigns/
    aa-and-cut-under-load.jsonl: 48 native trials of 3.6-15 s, ResNet-50, one rank; another
    job loaded the machine in the first rounds; their shares were taken over the whole
    trial, the ranks' CPU once reaped, which for these trials comes to the same). Of the 27
    trials at 9 images/s or more, 26
    saw other processes use 0.9-2.9 % of the machine (one saw 24.8 %: the load fell on its
    start-up, 5.4 s of wall against 3.8, not on its timed steps); all 16 below 8 images/s
    (1.3-7.6) saw 10.9-67 %; of the 5 between, 3 saw 1.4-2.9 % and 2 saw 8.7 and 10.6 %.
    Steal was at most 0.17 % in all 96 trials; a hypervisor taking a tenth is as clear a
    sign. 10 % stands well clear of the quiet level and of the measurement's own error
    (MIN_WINDOW_S)."""
    load = host_load or {}
    reasons = []
    other = _share(load.get("other_cpu_pct"))
    if other is not None and other >= OTHER_CPU_EVIDENCE_PCT:
        reasons.append(f"other CPU {other:.0f} % of the machine")
    steal = _share(load.get("steal_cpu_pct"))
    if steal is not None and steal >= STEAL_EVIDENCE_PCT:
        reasons.append(f"steal {steal:.0f} %")
    return "; ".join(reasons) or None
