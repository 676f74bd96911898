"""Which launches a group's comparisons leave out, and why: those whose own records show
that something outside them loaded the machine, each alike.
"""

import math
from dataclasses import dataclass

from kit.analysis import stats
from kit.analysis.values import rates
from kit.launch import hostload
from kit.results.record import Trial


@dataclass
class Screened:
    """A group's trials after the load screen: those kept; per arm the indices left out
    (with what showed the outside load), those that showed it but were kept (their arm had
    no other launch, with what showed it), and those kept although slow (no evidence)."""

    kept: dict[str, list[Trial]]
    left: dict[str, list[int]]
    evidence: dict[str, list[str]]
    loaded_kept: dict[str, list[int]]
    kept_evidence: dict[str, list[str]]
    slow: dict[str, list[int]]


def screen(by_rt: dict[str, list[Trial]]) -> Screened:
    """Leave a launch out when, and only when, its own record shows outside load
    (hostload.outside_load: CPU used on the machine outside the trial and its runtime's
    helpers, or steal), however it ran and however its arm's other launches ran: a rule
    that looked at how slow it was beside its arm would let loaded launches through once
    enough of one arm's carried load, and so blame the arm for another job's work. The one
    exception: an arm whose every launch in the group shows load keeps them (nothing else
    would be left to compare), and they are named as kept.

    A launch far slower than the arm + round fit predicts (stats.disturbed) without that
    evidence stays in, whatever its arm: a runtime's intermittently slow launch is its
    cost, and is named as this arm's own."""
    why = {id(t): hostload.outside_load(t.host_load) for rs in by_rt.values() for t in rs}
    out = set()
    for rs in by_rt.values():
        loaded = {id(t) for t in rs if why[id(t)]}
        if len(loaded) < len(rs):
            out |= loaded
    cells = [
        (rt, t, math.log(x))
        for rt, rs in by_rt.items()
        for t, x in zip(rs, rates(rs), strict=True)
        if t.repeat is not None
    ]
    flagged = stats.disturbed([(rt, (t.campaign, t.repeat), y) for rt, t, y in cells])
    slow = {id(t) for i, (_, t, _) in enumerate(cells) if i in flagged and not why[id(t)]}
    kept_loaded = {i for i, w in why.items() if w and i not in out}

    def named(rs: list[Trial], which: set[int]) -> tuple[list[int], list[str]]:
        return [t.index for t in rs if id(t) in which], [
            str(why[id(t)]) for t in rs if id(t) in which
        ]

    left = {rt: named(rs, out) for rt, rs in by_rt.items()}
    still = {rt: named(rs, kept_loaded) for rt, rs in by_rt.items()}
    return Screened(
        kept={rt: [t for t in rs if id(t) not in out] for rt, rs in by_rt.items()},
        left={rt: x[0] for rt, x in left.items()},
        evidence={rt: x[1] for rt, x in left.items()},
        loaded_kept={rt: x[0] for rt, x in still.items()},
        kept_evidence={rt: x[1] for rt, x in still.items()},
        slow={rt: [t.index for t in rs if id(t) in slow] for rt, rs in by_rt.items()},
    )


def kept(by_rt: dict[str, list[Trial]]) -> dict[str, list[Trial]]:
    """The trials screen keeps, found without its fit where no record shows outside load
    (nothing is then left out): kit compare's sides of 25,000 trials spent a third of
    their time in a fit that could leave nothing out."""
    if not any(hostload.outside_load(t.host_load) for rs in by_rt.values() for t in rs):
        return by_rt
    return screen(by_rt).kept
