"""What the host was doing during a trial: load average, other processes' CPU, steal.

A trial's figure can be off because a neighbour was busy; recording the host's
activity beside every trial lets a reader see that instead of guessing, and no
trial is ever dropped for it. Read from /proc (Linux): CPU seconds of the whole
machine, minus what the trial's own processes used (their rusage once reaped).
"""

import os
import resource
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sample:
    loadavg_1m: float
    busy_s: float  # CPU seconds of every process on the host (user, nice, system, irq)
    steal_s: float  # CPU seconds the hypervisor gave to other guests
    own_s: float  # CPU seconds of this process's reaped descendants


def sample() -> Sample:
    try:
        load1 = float(Path("/proc/loadavg").read_text().split()[0])
        cpu = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        load1, cpu = -1.0, []
    cpu += [0] * (8 - len(cpu))
    user, nice, system, _idle, _iowait, irq, softirq, steal = cpu[:8]
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Sample(
        load1,
        (user + nice + system + irq + softirq) / TICK,
        steal / TICK,
        kids.ru_utime + kids.ru_stime,
    )


def during(before: Sample, after: Sample, wall_s: float, own: bool) -> dict:
    """The host's activity over one trial, in per cent of the machine's CPU time.
    `own`: the trial's processes are this process's descendants (not so for Docker, whose
    container runs under the engine), so their CPU can be told apart from the others'."""
    capacity = max(wall_s, 1e-9) * (os.cpu_count() or 1)
    busy = after.busy_s - before.busy_s
    mine = after.own_s - before.own_s
    return {
        "loadavg_1m": before.loadavg_1m,
        "busy_cpu_pct": round(100 * busy / capacity, 1),
        "other_cpu_pct": round(100 * max(busy - mine, 0.0) / capacity, 1) if own else None,
        "steal_cpu_pct": round(100 * (after.steal_s - before.steal_s) / capacity, 2),
    }
