"""The report as one document, built once from an analysis: sections of titled tables,
paragraphs, lists and figures, plus the per-arm numbers. The writers only render it, so
the formats cannot disagree, and a new table is one Section here."""

import dataclasses
import math
from dataclasses import dataclass

from kit.core import benches
from kit.report import plots
from kit.results import analysis, fingerprints, precision, stats
from kit.results.analysis import Analysis, Arm, Group, Key

NOTES = (
    "A trial is one launch, the unit of replication. Medians: order-statistic intervals. "
    "Ratios to the baseline arm: paired by round (every arm runs in every round, in a "
    "seeded random order; the baseline may run more than once a round, its launches then "
    "averaged), the geometric mean of the per-round ratios with Student's t interval, so "
    "a cost in some launches only counts in full; a launch far slower than its arm and "
    "round predict is left out only when its record shows outside load (CPU used outside "
    "the trial, or steal), is named, and the verdict is one that holds with it and "
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


def _iv(iv: stats.Interval | None, digits: int) -> str:
    if iv is None:
        return "n/a"
    mark = "†" if iv.short else ""
    # a command's own figure can be any size: past 10^5, four significant digits
    form = ".4g" if abs(iv.value) >= 1e5 else f".{digits}f"
    return f"{iv.value:{form}} [{iv.low:{form}}, {iv.high:{form}}]{mark}"


def _ratio(arm: Arm, baseline: str) -> str:
    if arm.runtime == baseline:
        return "1 (reference)"
    return _iv(arm.ratio, 3) if arm.ratio else "n/a"


OWN_SPREAD = 1.25  # an arm's rounds varying this much more than the launches predict


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"±{100 * x:.1f}%"


def _title(k: Key) -> str:
    shape = "" if k.model == "-" else f" · {k.model} · batch {k.batch_size}"  # "-": a command
    return (
        f"{k.image} · {k.bench}{shape} · {k.ranks} rank(s)"
        + ("" if k.data in ("synthetic", "-") else f" · {k.data} data")
        + ("" if k.launcher == "local" else f" · via {k.launcher}")
        + ("" if k.variant == "cpu" else f" · {k.variant}")
        + (f" · {k.bench_args}" if k.bench_args else "")
        + ("" if not k.steps else f" · {k.steps} steps after {k.warmup_steps}")
    )


def _columns(a: Analysis, g: Group) -> list[str]:
    """The arms table's heading, in the group's metric (images/s for the CNN benchmarks);
    a compiled model's compile time beside its start-up."""
    unit = a.metric(g.key.bench).unit
    startup = COLUMNS.index(STARTUP) + 1
    compiled = ["compile s [CI]"] if _compiled(g) else []
    return [
        *COLUMNS[:2], f"{unit} median [CI]", f"vs {a.baseline} [CI]",
        *COLUMNS[2:startup], *compiled, *COLUMNS[startup:],
    ]  # fmt: skip


def _compiled(g: Group) -> bool:
    return any(arm.compile is not None for arm in g.arms)


STARTUP = "start-up s [CI]"
COLUMNS = [
    "runtime",
    "n",
    "± (precision)",
    "pairing",
    "detectable",
    "verdict",
    STARTUP,
    "host load / other CPU",
    "peak RSS MB",
    "framework",
    "MPI library",
]


def _precision(arm: Arm, target: float | None) -> str:
    """'±1.8%', or with a target '±1.8% (target ±2.0% reached)': one statement."""
    if arm.half_width is None:
        return "n/a"
    if target is None or not arm.precision:
        return _pct(arm.half_width)
    return f"{_pct(arm.half_width)} (target {_pct(target)} {arm.precision})"


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


def _load(arm: Arm) -> str:
    if "loadavg_1m" not in arm.load:
        return "n/a"
    other = arm.load.get("other_cpu_pct")
    return f"{arm.load['loadavg_1m']:.2f}" + ("" if other is None else f" / {other:.0f}%")


def _row(arm: Arm, a: Analysis, compiled: bool) -> list[str]:
    return [
        arm.runtime,
        str(arm.n),
        _iv(arm.rate, 1),
        _ratio(arm, a.baseline),
        _precision(arm, a.precision_target),
        arm.method or "-",
        _pct(arm.detectable),
        arm.verdict,
        _iv(arm.startup, 2),
        *([(_iv(arm.compile, 1) if arm.compile else "n/a")] if compiled else []),
        _load(arm),
        f"{arm.peak_rss_mb:.0f}" if arm.peak_rss_mb else "n/a",  # a command reports none
        arm.framework,
        arm.mpi,
    ]


PAIR_COLUMNS = [
    "runtime",
    "over",
    "ratio [CI]",
    "± (precision)",
    "pairing",
    "detectable",
    "verdict",
]


def _pair_row(arm: Arm, a: Analysis) -> list[str]:
    return [
        arm.runtime,
        arm.against,
        _iv(arm.ratio, 3) if arm.ratio else "n/a",
        _precision(arm, a.precision_target),
        arm.method or "-",
        _pct(arm.detectable),
        arm.verdict,
    ]


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
        where = f" ({_title(g.key)})" if len(a.groups) > 1 else ""
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


def _disturbed(g: Group) -> str:
    """Which trials the ratios left out and on what evidence, and each ratio with every
    launch kept, as one sentence (empty when none was left out)."""
    named = [
        f"{x.runtime} #{x.disturbed[0]} ({x.evidence[0]})"
        + "".join(f", #{i} ({why})" for i, why in zip(x.disturbed[1:], x.evidence[1:], strict=True))
        for x in g.arms
        if x.disturbed
    ]
    if not named:
        return ""
    every = [
        f"{x.runtime} {_iv(x.ratio_all, 3)}" for x in [*g.arms, *g.pairs] if x.ratio_all is not None
    ]
    return (
        "Left out of the ratios on evidence of outside load (more than "
        f"{stats.DISTURBED_SLOWDOWN}x slower than predicted, with the load in their record): "
        + "; ".join(named)
        + (". With every launch kept: " + "; ".join(every) if every else "")
        + ". The verdicts hold both ways."
    )


def _slow(g: Group) -> str:
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


def _spread(g: Group) -> str:
    """The group's variance decomposition, as one sentence."""
    v = g.variance
    if v is None or v.rounds < 2:
        return ""
    parts = [
        f"{name} {_pct(x)}"
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
        f" The median arm's launches ran {_pct(g.variance.typical_launches)} apart; each "
        "interval's width over the width that allows in its rounds: " + ", ".join(said) + "."
    )
    if own:
        text += (
            " Rounds that varied more than that predicts (SD of a round's log ratio), the "
            "arm's own variation: " + "; ".join(own) + "."
        )
    return text


def _header(a: Analysis) -> str:
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


def precision_cost(a: Analysis) -> str:
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


def _failed(a: Analysis) -> list[str]:
    return [
        f"#{r['index']} {r['runtime']} np={r['ranks']} {r['model']} bs={r['batch_size']}: "
        f"{r['status']} (exit {r['exit_code']}"
        + (f"; {r['cause']}" if r.get("cause") else "")
        + ")"
        for r in a.not_ok
    ]


def _runtimes(a: Analysis) -> list[str]:
    return [
        f"{rt} ({v['version']}): {'; '.join(v['settings']) or 'defaults'}"
        + (f"; passed through: {' '.join(v['args'])}" if v["args"] else "")
        for rt, v in a.runtimes.items()
    ]


def _key_cells(k: Key, *fields: str) -> list[str]:
    return [str(getattr(k, f)) for f in fields]


def _scaling_rows(a: Analysis) -> list[list[str]]:
    fields = ("image", "bench", "model", "data", "batch_size", "ranks")
    return [
        [*_key_cells(s.key, *fields), str(s.nodes), s.runtime, _iv(s.efficiency, 3)]
        for s in a.scaling
    ]


SCALING_COLUMNS = [
    "image",
    "bench",
    "model",
    "data",
    "batch",
    "ranks",
    "nodes",
    "runtime",
    "efficiency [CI]",
]
IO_COLUMNS = ["image", "bench", "model", "batch", "ranks", "runtime", "I/O overhead [CI]"]


def _io_rows(a: Analysis) -> list[list[str]]:
    fields = ("image", "bench", "model", "batch_size", "ranks")
    return [[*_key_cells(x.key, *fields), x.runtime, _iv(x.overhead, 3)] for x in a.io]


OOM_COLUMNS = ["image", "bench", "model", "batch", "ranks", "runtime", "trials"]


def _sweep_tables(a: Analysis) -> list[tuple[str, list[str], list[list[str]]]]:
    """A table per declared series of each sweep benchmark measured, its columns from the
    declaration (kitschema): what identifies a point, then each value's interval."""
    out = []
    for name in sorted({s.bench for s in a.sweeps}):
        spec = benches.get(name)
        for series in spec.series:
            mine = [s for s in a.sweeps if (s.bench, s.series) == (name, series.field)]
            columns = [
                *("image", "ranks", "launcher", "transport", "runtime", "n", *series.at),
                *(f"{v.label} {v.unit} [CI]" for v in series.values),
                spec.version_label,
            ]
            rows = [
                [
                    *(s.image, str(s.ranks), s.launcher, s.transport, s.runtime, str(s.n)),
                    *map(str, p.at),
                    *(_iv(p.values[v.key], v.digits) for v in series.values),
                    s.version,
                ]
                for s in mine
                for p in s.points
            ]
            out.append((f"{spec.title}: {series.title}", columns, rows))
    return out


def _oom_rows(a: Analysis) -> list[list[str]]:
    return [[str(o[f]) for f in (*analysis.OOM_FIELDS, "trials")] for o in a.oom]


def _sections(a: Analysis) -> list[tuple[str, list[str], list[list[str]]]]:
    """The tables after the per-configuration ones: (title, columns, rows), when not empty."""
    out = [
        ("Scaling efficiency", SCALING_COLUMNS, _scaling_rows(a)),
        ("I/O overhead", IO_COLUMNS, _io_rows(a)),
        *_sweep_tables(a),
        ("Did not fit in memory (out of memory is a result)", OOM_COLUMNS, _oom_rows(a)),
    ]
    return [x for x in out if x[2]]


PAIRS = "Every other pair (ratio: the row's runtime over the other, same family):"


PUBLISHED_COLUMNS = ["claim", "published", "their setting", "source", "measured here", "finding"]
PUBLISHED_NOTE = (
    "Like is compared with like: ratios, efficiencies and overheads, never absolute "
    "images/s across different hardware. A finding reads the measured interval (at the "
    "confidence above) against the published figure on the same scale."
)


def _published_rows(a: Analysis) -> list[list[str]]:
    return [
        [p[c] for c in ("claim", "published", "setting", "source", "measured", "finding")]
        for p in a.published
    ]


def _intro(a: Analysis) -> list[str]:
    if not a.preset:
        return []
    return [f"Preset {a.preset['name']}: {a.preset['title']}. {a.preset['question']}", ""]


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[str]]
    fold: str = ""  # the HTML page shows it collapsed, under this summary


@dataclass(frozen=True)
class Bullets:
    items: list[str]
    kind: str = ""  # a class for the HTML list ("answers")


Block = Table | Bullets | str  # a str is a paragraph


@dataclass(frozen=True)
class Section:
    title: str
    blocks: list


@dataclass(frozen=True)
class Document:
    """What a report says, built once from the analysis; each format only renders it, so
    Markdown and HTML cannot disagree, and a new table is one Section here."""

    title: str
    lead: list[Block]  # before the first section: the preset, the answers, the header
    sections: list[Section]
    arms: Table  # one row per arm and comparison, raw numbers: the CSV file
    data: dict  # the whole analysis as plain data: the JSON file


LAUNCH_COST = "Launch cost by phase (median s)"
LAUNCH_KEY = ("image", "bench", "model", "data", "batch_size", "ranks")


def _launch_cost(a: Analysis) -> Section | None:
    """Each arm's launch by phase, so that a runtime's start-up cost is seen where it lies
    (its own start, imports from its image, ...), what each phase holds, and the launches a
    minute precision is bought with; None where no record carries phases."""
    arms = [(g.key, arm) for g in a.groups for arm in g.arms if arm.phases]
    if not arms:
        return None
    meaning = {**benches.PHASES, **analysis.AFTER}
    names = [p for p in meaning if any(p in arm.phases for _, arm in arms)]
    rows = [
        [
            *_key_cells(k, *LAUNCH_KEY),
            arm.runtime,
            str(arm.n),
            *(f"{arm.phases[p]:.2f}" if p in arm.phases else "n/a" for p in names),
        ]
        for k, arm in arms
    ]
    columns = ["image", "bench", "model", "data", "batch", "ranks", "runtime", "n", *names]
    blocks: list = [Table(columns, rows), "; ".join(f"{p}: {meaning[p]}" for p in names) + "."]
    if a.minutes:
        blocks.append(
            f"Launches per minute: {a.ok / a.minutes:.2f} ({a.ok} ok launches in "
            f"{a.minutes:.1f} min, from the first trial's start to the last one's end, "
            "warm-up and failed trials' time included)."
        )
    return Section(LAUNCH_COST, blocks)


def _fingerprints(g: Group) -> Section | None:
    """Beside a group's verdicts: what differs between each arm's launches and the
    baseline's, and the arm that would test each difference (kit.results.fingerprints);
    None where no launch carries a fingerprint."""
    fp = g.fingerprints
    if fp is None:
        return None
    blocks: list = list(fingerprints.sentences(fp, {x.runtime: x.verdict for x in g.arms}))
    if rows := fingerprints.rows(fp):
        fold = f"Differences from {fp.baseline}'s launches ({len(rows)})"
        blocks.append(Table(fingerprints.columns(fp), rows, fold))
    if rows := fingerprints.varies_rows(fp):
        fold = f"What varies between an arm's own launches ({len(rows)})"
        blocks.append(Table(fingerprints.VARIES_COLUMNS, rows, fold))
    return Section(f"What differs between launches · {_title(g.key)}", blocks)


def build(a: Analysis, figures: bool) -> Document:
    """The report of an analysis (figures: draw them, for the HTML page)."""
    lead: list[Block] = [x for x in _intro(a) if x]
    if said := answers(a):
        lead.append(Bullets(said, "answers"))
    lead.append(_header(a))
    if cost := precision_cost(a):
        lead.append(cost)
    sections = []
    if a.published:
        sections.append(
            Section(
                "Published beside measured",
                [Table(PUBLISHED_COLUMNS, _published_rows(a)), PUBLISHED_NOTE],
            )
        )
    for g in a.groups:
        blocks: list = [Table(_columns(a, g), [_row(x, a, _compiled(g)) for x in g.arms])]
        if g.pairs:
            blocks += [PAIRS, Table(PAIR_COLUMNS, [_pair_row(x, a) for x in g.pairs])]
        blocks += [text for text in (_disturbed(g), _slow(g), _spread(g)) if text]
        sections.append(Section(_title(g.key), blocks))
        if launches := _fingerprints(g):
            sections.append(launches)
    if launch := _launch_cost(a):
        sections.append(launch)
    sections += [Section(title, [Table(columns, rows)]) for title, columns, rows in _sections(a)]
    if a.crowded:
        sections.append(Section("Ranks on fewer hosts than asked", [Bullets(a.crowded)]))
    if a.not_ok:
        sections.append(Section("Trials that did not finish", [Bullets(_failed(a))]))
    if a.left_out:
        sections.append(Section("Trials left out of the analysis", [Bullets(a.left_out)]))
    if figures:
        sections.append(Section("Figures", list(plots.figures(a))))
    sections.append(Section("Runtimes", [Bullets(_runtimes(a)), NOTES]))
    return Document(report_title(a), lead, sections, _arms(a), dataclasses.asdict(a))


ARMS_COLUMNS = [
    "image",
    "bench",
    "model",
    "batch_size",
    "ranks",
    "data",
    "launcher",
    "variant",
    "bench_args",
    "steps",
    "warmup_steps",
    "runtime",
    "against",
    "n",
    "metric",
    "median",
    "median_low",
    "median_high",
    "ratio",
    "ratio_low",
    "ratio_high",
    "half_width",
    "pairing",
    "detectable",
    "verdict",
    "precision",
    "startup_s",
    "peak_rss_mb",
    "framework",
    "mpi_library",
    "fingerprint_differences",
]


def _arms(a: Analysis) -> Table:
    """Every arm and comparison with its key and raw numbers, for spreadsheets."""
    rows = []
    for g in a.groups:
        k = g.key
        for x in [*g.arms, *g.pairs]:
            r = x.ratio
            cells = [
                k.image,
                k.bench,
                k.model,
                k.batch_size,
                k.ranks,
                k.data,
                k.launcher,
                k.variant,
                k.bench_args,
                "" if k.steps is None else k.steps,
                "" if k.warmup_steps is None else k.warmup_steps,
                x.runtime,
                x.against,
                x.n,
                a.metric(k.bench).key,
                f"{x.rate.value:.4g}",
                f"{x.rate.low:.4g}",
                f"{x.rate.high:.4g}",
                *(
                    ("", "", "")
                    if r is None
                    else (f"{r.value:.5f}", f"{r.low:.5f}", f"{r.high:.5f}")
                ),
                "" if x.half_width is None else f"{x.half_width:.5f}",
                x.method,
                "" if x.detectable is None else f"{x.detectable:.5f}",
                x.verdict,
                x.precision,
                "" if x.startup is None else f"{x.startup.value:.4g}",
                f"{x.peak_rss_mb:.1f}",
                x.framework,
                x.mpi,
                fingerprints.summary(g.fingerprints, x.runtime)
                if g.fingerprints and x.against == g.fingerprints.baseline
                else "",
            ]
            rows.append(["" if c is None else str(c) for c in cells])
    return Table(ARMS_COLUMNS, rows)
