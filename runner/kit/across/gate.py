"""`kit check`: a regression gate for CI and cron, on the report's own intervals.

A gate that fails on a point estimate fails on noise as often as on a change. This one
fails (EXIT_FAILED, 1) only when the whole interval lies beyond the bound; within the
bound it passes (EXIT_OK, 0). When an interval straddles the bound, or there is none
(too few rounds), it says "cannot tell" with a warning and exits EXIT_UNDECIDED (3): the
campaign cannot tell, more rounds would narrow it, and a CI decides what that means
(never a pass by default).
"""

import math
from dataclasses import dataclass
from pathlib import Path

from kit.across import compare
from kit.analysis import stats, summary
from kit.analysis.findings import REFERENCE
from kit.core import units
from kit.core.errors import EXIT_FAILED, EXIT_OK, EXIT_UNDECIDED, KitError
from kit.core.schema import printable

WITHIN, BEYOND, CANNOT_TELL = "within", "BEYOND", "cannot tell"
STRADDLES = "its interval straddles the bound"


@dataclass(frozen=True)
class Checked:
    what: str  # e.g. "docker overhead, torch-cnn resnet50 ..."
    interval: stats.Interval | None  # of the quantity bounded; None: no interval to judge
    bound: float
    outcome: str
    note: str = ""  # why no interval (too few rounds, mismatched software)


def bounds(text: str) -> dict[str, float]:
    """'docker=5%,singularity=3%' as {arm: overhead bound}."""
    out = {}
    for part in text.split(","):
        arm, sep, pct = (x.strip() for x in part.partition("="))
        if not sep or not arm:
            raise KitError(
                f"--max-overhead '{text}' must be ARM=PCT[,ARM=PCT], e.g. docker=5%,singularity=3%"
            )
        if arm in out:  # the last would silently win
            raise KitError(f"--max-overhead '{text}' bounds {arm} twice; give each arm once")
        out[arm] = units.percent(f"--max-overhead {arm}", pct)
    return out


def judge(iv: stats.Interval, low: float, high: float) -> str:
    """Where an interval lies against the allowed range [low, high]."""
    if iv.low > high or iv.high < low:
        return BEYOND
    if low <= iv.low and iv.high <= high:
        return WITHIN
    return CANNOT_TELL


def overhead(out_dir: Path, allowed: dict[str, float], conf: float) -> list[Checked]:
    """Each bounded arm's overhead against native in each configuration, from the report's
    own analysis (its family-adjusted intervals, with the launches it left out put back
    where that widens them)."""
    if REFERENCE in allowed:  # it checked nothing, and passed
        raise KitError(
            f"--max-overhead bounds {REFERENCE}, which every overhead is measured against; "
            "bound the other arms, e.g. docker=5%"
        )
    a = summary.analyse([out_dir], conf)
    arms = {arm.runtime for g in a.groups for arm in g.arms}
    if missing := sorted(allowed.keys() - arms):
        raise KitError(
            f"--max-overhead names {', '.join(missing)}, not an arm of {out_dir} "
            f"(arms: {', '.join(sorted(arms))})"
        )
    out = []
    for g in a.groups:
        for arm in g.arms:
            if arm.runtime not in allowed or arm.against != REFERENCE:
                continue
            bound, what = allowed[arm.runtime], f"{arm.runtime} overhead, {compare.describe(g.key)}"
            both = [iv for iv in (arm.ratio, arm.ratio_all) if iv is not None]
            if not both or any(iv.short for iv in both):
                out.append(Checked(what, None, bound, CANNOT_TELL, arm.verdict or "no interval"))
                continue
            low, high = min(iv.low for iv in both), max(iv.high for iv in both)
            # overhead: the share of native's figure lost (higher is better), or added
            faster = a.metric(g.key.bench).higher_is_better
            cost = (
                stats.Interval(1 - arm.ratio.value, 1 - high, 1 - low, arm.ratio.coverage)
                if faster
                else stats.Interval(arm.ratio.value - 1, low - 1, high - 1, arm.ratio.coverage)
            )
            out.append(Checked(what, cost, bound, judge(cost, -math.inf, bound)))
    if not out:  # a gate that checked nothing must not pass
        raise KitError(
            f"--max-overhead: no arm it bounds was compared with {REFERENCE} in {out_dir} "
            f"(arms: {', '.join(sorted(arms))}); run {REFERENCE} beside them"
        )
    return out


def change(
    out_dir: Path, against: compare.Side, bound: float, conf: float, renamed: dict[str, str]
) -> list[Checked]:
    """Each runtime's change of overhead, and native's of throughput, from the selection
    to the campaign, against ±bound."""
    c = compare.compare(against, compare.side(str(out_dir), None), conf, renamed)
    out = []
    for ch in c.changes:
        # the arm as the records name it, escaped: the check's line stays one line
        what = printable(f"{ch.runtime} {ch.measure}, {compare.describe(ch.key)}")
        if ch.interval is None:
            out.append(Checked(what, None, bound, CANNOT_TELL, ch.verdict))
            continue
        iv = ch.interval
        shift = stats.Interval(iv.value - 1, iv.low - 1, iv.high - 1, iv.coverage)
        out.append(Checked(what, shift, bound, judge(shift, -bound, bound)))
    return out


def text(checked: list[Checked], kind: str) -> str:
    """One line a check: the quantity with its interval, the bound, and the outcome."""
    lines = []
    for c in checked:
        if c.interval is None:
            lines.append(f"{c.outcome}: {c.what}: {c.note}")
            continue
        iv = c.interval
        bound = f"{c.bound:.1%}" if kind == "overhead" else f"±{c.bound:.1%}"
        lines.append(
            f"{c.outcome}: {c.what}: {kind} {iv.value:+.1%} [{iv.low:+.1%}, {iv.high:+.1%}], "
            f"bound {bound}"
        )
    return "\n".join(lines) + "\n"


def warnings(checked: list[Checked]) -> list[str]:
    """The warning for each check the interval cannot settle."""
    return [
        f"cannot tell whether {c.what} is within the bound ({c.note or STRADDLES}); more "
        "rounds narrow the interval"
        for c in checked
        if c.outcome == CANNOT_TELL
    ]


def exit_code(checked: list[Checked]) -> int:
    """EXIT_FAILED where any interval lies beyond its bound, else EXIT_UNDECIDED where any
    cannot tell, else EXIT_OK: what a CI reads."""
    outcomes = {c.outcome for c in checked}
    if BEYOND in outcomes:
        return EXIT_FAILED
    return EXIT_UNDECIDED if CANNOT_TELL in outcomes else EXIT_OK
