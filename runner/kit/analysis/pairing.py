"""Each arm compared with its baseline: the ratio of their figures, paired by round where
both finished it (drift falls on both), at the confidence the family of comparisons
shares, and the verdict and precision that ratio supports.
"""

import dataclasses
import math
import statistics
from collections.abc import Callable

from kit.analysis import stats
from kit.analysis.findings import TOO_FEW, Arm, Group
from kit.analysis.values import by_round, rates
from kit.core import benches
from kit.results.record import Trial


def family(
    groups: list[Group], ref: str, all_pairs: bool, allow_mismatch: bool
) -> list[tuple[Group, Arm, Arm]]:
    """The comparisons the confidence is shared among: every arm against the group's
    reference arm, and with `all_pairs` every other pair too (added to the group's
    pairs); arms of different software are left out unless mismatches are allowed."""
    found = [
        (g, arm, g.arms[0])
        for g in groups
        if g.arms[0].runtime == ref
        for arm in g.arms[1:]
        if _comparable(arm, g.arms[0], allow_mismatch)
    ]
    if all_pairs:
        for g in groups:
            others = g.arms[1:] if g.arms[0].runtime == ref else g.arms
            for i, base in enumerate(others):
                for arm in others[i + 1 :]:
                    pair = dataclasses.replace(arm, verdict="", against=base.runtime)
                    g.pairs.append(pair)
                    if _comparable(pair, base, allow_mismatch):
                        found.append((g, pair, base))
    return found


def _same_software(arm: Arm, ref: Arm) -> bool:
    return (arm.framework, arm.mpi) == (ref.framework, ref.mpi)


def _comparable(arm: Arm, ref: Arm, allow_mismatch: bool) -> bool:
    """Same software as the reference (or --allow-mismatch); else say why in the verdict."""
    if _same_software(arm, ref) or allow_mismatch:
        return True
    arm.verdict = (
        f"not compared: software differs from {ref.runtime} "
        f"({arm.framework} / {arm.mpi} vs {ref.framework} / {ref.mpi}); "
        "--allow-mismatch compares anyway"
    )
    return False


def _ratio(
    arm: Arm,
    ref: Arm,
    rs: list[Trial],
    ref_rs: list[Trial],
    each: float,
    paired: Callable[[list[tuple[float, float]], float], stats.Interval] = stats.paired_ratio,
) -> None:
    """Ratio arm/ref at the family-adjusted confidence `each`: paired by round when any
    round has both (too few rounds then reads "too few trials"), else unpaired."""
    mine, theirs = by_round(rs), by_round(ref_rs)
    pairs = [(mine[k], theirs[k]) for k in sorted(mine.keys() & theirs.keys())]
    if pairs:  # a round-interleaved campaign: too few rounds is "too few", not unpaired
        launches = len(ref_rs) / max(len(theirs), 1)
        times = f", {ref.runtime} x{launches:.2g} a round" if launches > 1.05 else ""
        arm.ratio = paired(pairs, each)
        arm.method = f"paired ({len(pairs)} rounds{times})"
        arm.rounds, arm.baseline_launches = len(pairs), launches
        logs = [math.log(a / b) for a, b in pairs]
        arm.round_spread = statistics.stdev(logs) if len(logs) >= 2 else None
    else:
        arm.ratio, arm.method = stats.ratio_ci(rates(rs), rates(ref_rs), each), "unpaired"
        arm.rounds, arm.baseline_launches, arm.round_spread = 0, 1.0, None


def compare(
    arm: Arm,
    ref: Arm,
    kept: tuple[list[Trial], list[Trial]],
    every: tuple[list[Trial], list[Trial]],
    each: float,
    target: float | None,
) -> None:
    """The ratio on the launches kept (the geometric mean of the per-round ratios: an
    intermittent cost counts in full), and where some were left out also on every launch
    (ratio_all); the verdict and the precision are those that hold under both."""
    arm.against = ref.runtime
    if len(every[0]) + len(every[1]) > len(kept[0]) + len(kept[1]):
        # the launches put back are ones the record shows another job slowed (2-7x): the
        # check asks whether the verdict survives without trusting the screen, so it takes
        # the centre those few wild rounds do not move
        _ratio(arm, ref, *every, each, stats.robust_paired_ratio)
        arm.ratio_all = arm.ratio
    _ratio(arm, ref, *kept, each)
    both = [iv for iv in (arm.ratio, arm.ratio_all) if iv is not None]
    arm.half_width = max(stats.half_width(iv) for iv in both)
    arm.detectable = stats.detectable(arm.ratio)
    if any(iv.short for iv in both):
        robust = arm.ratio_all is not None and arm.ratio_all.short
        need = stats.min_n(each) if robust or not arm.method.startswith("paired") else 0
        arm.verdict = f"{TOO_FEW} (need {max(need, stats.MIN_ROUNDS)})"
    else:
        better = benches.metric(kept[0][0].bench, kept[0][0].result).higher_is_better
        hull = stats.Interval(
            arm.ratio.value,
            min(iv.low for iv in both),
            max(iv.high for iv in both),
            min(iv.coverage for iv in both),
            arm.ratio.wanted,
        )
        arm.verdict = stats.verdict(hull, higher_is_faster=better)
    if not _same_software(arm, ref):
        arm.verdict += " (MISMATCHED SOFTWARE)"
    if target is not None:
        reached = arm.half_width <= target and not any(iv.short for iv in both)
        arm.precision = "reached" if reached else "not reached"
