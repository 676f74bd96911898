"""Which launches a group's comparisons leave out, and why: only those whose records
show that something outside them slowed them.
"""

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass

from kit.launch import hostload
from kit.results import stats
from kit.results.figures import rates
from kit.results.record import Trial


@dataclass
class Screened:
    """A group's trials after the load screen: those kept, and per arm the indices left out
    (with what showed the outside load) and those kept although slow (no evidence)."""

    kept: dict[str, list[Trial]]
    left: dict[str, list[int]]
    evidence: dict[str, list[str]]
    slow: dict[str, list[int]]


def screen(by_rt: dict[str, list[Trial]]) -> Screened:
    """Leave a launch out only on evidence that something outside it slowed it.

    A launch is a suspect when it ran far slower than the arm + round fit predicts
    (stats.disturbed), or, with its record showing outside load, far slower than its arm's
    median (a round where half the arms were loaded moves the round's term, not the
    residuals). A suspect is left out only when its record shows the load
    (hostload.outside_load: CPU used on the machine outside the trial, or steal); a slow
    launch without that evidence stays in, whatever its arm: a runtime's intermittently
    slow launch is its cost, and is named as this arm's own."""
    cells = [
        (rt, t, math.log(x))
        for rt, rs in by_rt.items()
        for t, x in zip(rs, rates(rs), strict=True)
        if t.repeat is not None
    ]
    flagged = stats.disturbed([(rt, (t.campaign, t.repeat), y) for rt, t, y in cells])
    logs: dict[str, list[float]] = defaultdict(list)
    for rt, _, y in cells:
        logs[rt].append(y)
    centre = {rt: statistics.median(ys) for rt, ys in logs.items()}
    why = {id(t): hostload.outside_load(t.host_load) for _, t, _ in cells}
    suspects = {
        id(t)
        for i, (rt, t, y) in enumerate(cells)
        if i in flagged or (why[id(t)] and y - centre[rt] < -math.log(stats.DISTURBED_SLOWDOWN))
    }
    out = {i for i in suspects if why[i]}
    return Screened(
        kept={rt: [t for t in rs if id(t) not in out] for rt, rs in by_rt.items()},
        left={rt: [t.index for t in rs if id(t) in out] for rt, rs in by_rt.items()},
        evidence={rt: [str(why[id(t)]) for t in rs if id(t) in out] for rt, rs in by_rt.items()},
        slow={rt: [t.index for t in rs if id(t) in suspects - out] for rt, rs in by_rt.items()},
    )


def kept(by_rt: dict[str, list[Trial]]) -> dict[str, list[Trial]]:
    """The trials screen keeps, found without its fit where no record shows outside load
    (nothing is then left out): kit compare's sides of 25,000 trials spent a third of
    their time in a fit that could leave nothing out."""
    if not any(hostload.outside_load(t.host_load) for rs in by_rt.values() for t in rs):
        return by_rt
    return screen(by_rt).kept
