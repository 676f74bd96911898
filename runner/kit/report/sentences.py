"""What a report says in prose: its title, its opening (the preset's question, one
sentence a comparison, the campaign), what precision would cost, and under each
configuration's table what was left out, what was slow and where the spread lies."""

import math

from kit.analysis import precision, stats
from kit.analysis.findings import Analysis, Arm, Group
from kit.launch import hostload
from kit.report.model import Block, Bullets
from kit.report.text import interval, percent, title

NOTES = (
    "A trial is one launch, the unit of replication. Medians: order-statistic intervals. "
    "Ratios to the baseline arm: paired by round (every arm runs in every round, in a "
    "seeded random order; the baseline may run more than once a round, its launches then "
    "averaged), the geometric mean of the per-round ratios with Student's t interval, so "
    "a cost in some launches only counts in full; a launch whose record shows outside "
    "load (CPU used outside the trial and its runtime's helpers, or steal) is left out "
    "and named, whatever its speed, and the verdict is one that holds with it and "
    "without it (that check: the Hodges-Lehmann centre, exact Wilcoxon interval); a slow "
    "launch without that evidence stays in, as its arm's own cost; unpaired (Mann-Whitney "
    "interval of the shift) only where no round has both arms. The verdicts form one "
    "family: each ratio's interval is Bonferroni-adjusted over the report's comparisons, "
    "so all verdicts hold together at the stated confidence; other intervals are each at "
    "that confidence. † fewer trials than the interval needs at its confidence: the range "
    "shown is min to max. "
    "'Detectable' is the smallest difference this campaign's own spread would reveal "
    f"with {stats.POWER:.0%} power: 'no significant difference' means no difference "
    "larger than that. Start-up is launch to first finished step, reported apart from "
    "throughput. Scaling efficiency is throughput at N ranks over N times one rank's "
    "(per-rank batch size fixed). I/O overhead is (synthetic - real) / synthetic images/s."
)


OWN_SPREAD = 1.25  # an arm's rounds varying this much more than the launches predict


def report_title(a: Analysis) -> str:
    """What the campaign measured, when and where: the report's title, whatever path
    the report was asked for by ('kit report .')."""
    images = sorted({g.key.image for g in a.groups} | {s.image for s in a.sweeps})
    what = sorted({g.key.bench for g in a.groups} | {s.bench for s in a.sweeps})
    when = ""
    if a.started:
        first, last = (t.replace("T", " ")[:16] for t in a.started)
        when = f", {first} to {last[11:] if last[:10] == first[:10] else last} UTC"
    named = f"{a.preset['name']}: " if a.preset else ""
    return (
        f"kit report: {named}{', '.join(images) or 'no trials'} ({', '.join(what)})"
        f"{when}, on {', '.join(a.hosts) or '?'}"
    )


def lead(a: Analysis) -> list[Block]:
    """The report's opening, before its first section: a preset's question, one answer a
    comparison, the campaign and its host, what more precision would cost."""
    blocks: list[Block] = []
    if a.preset:
        blocks.append(f"Preset {a.preset['name']}: {a.preset['title']}. {a.preset['question']}")
    if said := answers(a):
        blocks.append(Bullets(said, "answers"))
    blocks.append(_header(a))
    if cost := _precision_cost(a):
        blocks.append(cost)
    return blocks


NUMBERS = ("one", "both", "all three", "all four", "all five", "all six", "all seven")


def _together(a: Analysis) -> str:
    if a.comparisons <= 1:
        return f"{a.confidence:.0%}"
    many = NUMBERS[a.comparisons - 1] if a.comparisons <= len(NUMBERS) else f"all {a.comparisons}"
    return f"{a.confidence:.0%} for {many} together"


def _between(arm: Arm, higher_is_better: bool) -> str:
    """'between 2.1 % slower and 3.4 % faster than native', from the ratio's interval."""

    def side(ratio: float) -> tuple[float, str]:
        faster = (ratio > 1) == higher_is_better
        return abs(ratio - 1) * 100, "faster" if faster else "slower"

    (lo, lo_word), (hi, hi_word) = side(arm.ratio.low), side(arm.ratio.high)
    if lo_word == hi_word:  # one side of 1: the nearer bound first
        (lo, hi) = sorted((lo, hi))
        return f"between {lo:.1f} % and {hi:.1f} % {hi_word} than {arm.against}"
    if lo_word == "faster":  # lower-is-better metrics: the interval's ends swap words
        (lo, lo_word), (hi, hi_word) = (hi, hi_word), (lo, lo_word)
    return f"between {lo:.1f} % {lo_word} and {hi:.1f} % {hi_word} than {arm.against}"


def answers(a: Analysis) -> list[str]:
    """The report's first lines: one sentence a reader can quote per comparison."""
    out = []
    for g in a.groups:
        where = f" ({title(g.key)})" if len(a.groups) > 1 else ""
        better = a.metric(g.key.bench).higher_is_better
        for arm in [*g.arms, *g.pairs]:
            if not arm.against:
                continue
            if arm.ratio is None or arm.ratio.short or arm.too_few or not arm.verdict:
                said = arm.verdict or "not compared"
            else:
                said = f"{_between(arm, better)} ({_together(a)})"
                if arm.verdict.endswith("(MISMATCHED SOFTWARE)"):
                    said += ", with mismatched software"
            out.append(f"{arm.runtime}{where}: {said}.")
    return out


def _named(runtime: str, indices: list[int], why: list[str]) -> str:
    """'native #6 (other CPU 44 % of the machine), #9 (...)': an arm's launches, each with
    what its record showed."""
    return f"{runtime} " + ", ".join(f"#{i} ({w})" for i, w in zip(indices, why, strict=True))


def disturbed(g: Group) -> str:
    """Every launch whose record shows outside load: those the ratios left out and on what
    evidence, with each ratio with every launch kept, and those kept (their arm had no
    other), as one sentence (empty when no launch showed load)."""
    named = [_named(x.runtime, x.disturbed, x.evidence) for x in g.arms if x.disturbed]
    kept = [_named(x.runtime, x.loaded_kept, x.kept_evidence) for x in g.arms if x.loaded_kept]
    said = []
    if named:
        every = [
            f"{x.runtime} {interval(x.ratio_all, 3)}"
            for x in [*g.arms, *g.pairs]
            if x.ratio_all is not None
        ]
        said.append(
            "Left out of the ratios on evidence of outside load (each launch whose record "
            f"shows other processes using {hostload.OTHER_CPU_EVIDENCE_PCT:g} % of the "
            f"machine or more, or {hostload.STEAL_EVIDENCE_PCT:g} % steal, however fast it "
            "ran): "
            + "; ".join(named)
            + (". With every launch kept: " + "; ".join(every) if every else "")
            + ". The verdicts hold both ways."
        )
    if kept:
        said.append(
            "Kept although their record shows outside load (every launch of their arm "
            "does, so none could be left out): " + "; ".join(kept) + "."
        )
    return " ".join(said)


def slow(g: Group) -> str:
    """Each arm's launches far slower than their round with no evidence of outside load:
    kept, and said to be the arm's own (empty when none)."""
    named = [
        f"{x.runtime}: {len(x.slow)} of {x.n} launches at least {stats.DISTURBED_SLOWDOWN}x "
        f"slower than their round (#{', #'.join(map(str, x.slow))})"
        for x in g.arms
        if x.slow
    ]
    if not named:
        return ""
    return (
        "Slow launches with no sign of outside load, kept in the ratios as the arm's own "
        "behaviour: " + "; ".join(named) + "."
    )


def spread(g: Group) -> str:
    """The group's variance decomposition, as one sentence."""
    v = g.variance
    if v is None or v.rounds < 2:
        return ""
    parts = [
        f"{name} {percent(x)}"
        for name, x in (
            ("within a trial", v.within_trial),
            ("between launches", v.between_launches),
            ("drift across rounds", v.across_rounds),
        )
        if x is not None
    ]
    text = f"Spread of one trial's figure (relative SD, {v.rounds} complete rounds): " + (
        ", ".join(parts) + "."
    )
    return text + _allowance(g)


def _allowance(g: Group) -> str:
    """Each paired interval against the width the launch spread allows in its rounds
    (precision.allowed), and the arms whose own rounds varied more than that spread
    predicts: what widens an interval beyond the machine's noise."""
    said, own = [], []
    for arm in g.arms:
        if arm.half_width is None or arm.ratio is None:
            continue
        a = precision.allowance(
            arm.half_width, arm.rounds, arm.baseline_launches, arm.ratio.wanted,
            arm.round_spread, g.variance.typical_launches if g.variance else None,
        )  # fmt: skip
        if a is None:
            continue
        every = arm.ratio_all  # the check with every launch kept, where some were left out
        widened = every is not None and stats.half_width(every) > stats.half_width(arm.ratio)
        why = [w for w, yes in (("with every launch", widened),
                                ("its slow launches kept", a.factor > OWN_SPREAD and arm.slow))
               if yes]  # fmt: skip
        said.append(f"{arm.runtime} {a.factor:.2f}x" + (f" ({', '.join(why)})" if why else ""))
        if a.own > OWN_SPREAD * a.expected:
            own.append(f"{arm.runtime} ±{100 * a.own:.1f}% against ±{100 * a.expected:.1f}%")
    if not said:
        return ""
    text = (
        f" The median arm's launches ran {percent(g.variance.typical_launches)} apart; each "
        "interval's width over the width that allows in its rounds: " + ", ".join(said) + "."
    )
    if own:
        text += (
            " Rounds that varied more than that predicts (SD of a round's log ratio), the "
            "arm's own variation: " + "; ".join(own) + "."
        )
    return text


def _header(a: Analysis) -> str:
    """The campaign in one paragraph: its trials, host, images and confidence."""
    h = {k: a.host.get(k, "?") for k in ("cpu_model", "cores", "kernel")}
    skipped = f" {len(a.skipped)} unreadable lines skipped." if a.skipped else ""
    if a.left_out:
        skipped += f" {len(a.left_out)} ok trials left out: their figure is no number above 0."
    family = (
        f" Confidence {a.confidence:.0%} for all {a.comparisons} comparisons together "
        f"(Bonferroni: each at {a.each_confidence:.2%})."
        if a.comparisons > 1
        else f" Confidence {a.confidence:.0%}."
    )
    target = (
        f" Precision target ±{a.precision_target:.1%}." if a.precision_target is not None else ""
    )
    images = "; ".join(f"{name} ({what})" for name, what in sorted(a.images.items()))
    return (
        f"{a.trials} trials in {a.out_dir}: {a.ok} ok, {len(a.not_ok)} not ok, {a.warmup} warm-up "
        f"(discarded).{skipped} Host: {h['cpu_model']}, {h['cores']} cores, kernel "
        f"{h['kernel']}.{f' Images: {images}.' if images else ''}{family}{target}"
    )


def _precision_cost(a: Analysis) -> str:
    """What ±5 % and ±2 % for every comparison at once would take on this machine, from the
    campaign's own spread and time a round ("" before three paired rounds)."""
    if not a.projection:
        return ""

    def one(p: precision.Projection) -> str:
        if p.minutes is None:
            return f"±{p.precision:.0%} about {p.rounds} rounds"
        budget = max(1, math.ceil(p.minutes))
        return (
            f"±{p.precision:.0%} about {p.rounds} rounds, {budget} min here "
            f"(--budget {budget}m; the demo: KIT_DEMO_BUDGET={budget}m)"
        )

    return (
        "What precision costs here, at this campaign's spread: "
        + "; ".join(one(p) for p in a.projection)
        + "."
    )
