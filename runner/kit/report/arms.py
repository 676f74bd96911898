"""The tables of arms: each configuration's arms against the baseline and its other
pairs, as the report shows them, and every arm with its raw numbers for the CSV file."""

from kit.analysis import fingerprints, stats
from kit.analysis.findings import Analysis, Arm, Group
from kit.report.model import Block, Table
from kit.report.text import interval, percent

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


def tables(a: Analysis, g: Group) -> list[Block]:
    """A configuration's arms table, and its other pairs' under their heading, if any."""
    compiled = _compiled(g)
    blocks: list[Block] = [Table(_columns(a, g), [_row(x, a, compiled) for x in g.arms])]
    if g.pairs:
        blocks += [PAIRS, Table(PAIR_COLUMNS, [_pair_row(x, a) for x in g.pairs])]
    return blocks


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


def _ratio(arm: Arm, baseline: str) -> str:
    if arm.runtime == baseline:
        return "1 (reference)"
    return interval(arm.ratio, 3) if arm.ratio else "n/a"


def _precision(arm: Arm, target: float | None) -> str:
    """'±1.8%', or with a target '±1.8% (target ±2.0% reached)': one statement. Where
    launches were left out and the interval with them put back is the wider (the one the
    ± is), it says so beside the kept launches' own, which the ratio column shows."""
    if arm.half_width is None:
        return "n/a"
    said = percent(arm.half_width)
    if arm.ratio is not None and arm.ratio_all is not None:
        kept = stats.half_width(arm.ratio)
        if arm.half_width > kept:
            said += f" with every launch ({percent(kept)} without those left out)"
    if target is None or not arm.precision:
        return said
    return f"{said} (target {percent(target)} {arm.precision})"


def _load(arm: Arm) -> str:
    """'1.20 / 2%, helpers 6%': the median load average, other processes' share of the
    CPU, and the runtime's helpers' apart (theirs is the runtime's, not outside load)."""
    if "loadavg_1m" not in arm.load:
        return "n/a"
    other, helper = arm.load.get("other_cpu_pct"), arm.load.get("helper_cpu_pct")
    return (
        f"{arm.load['loadavg_1m']:.2f}"
        + ("" if other is None else f" / {other:.0f}%")
        + ("" if not helper else f", helpers {helper:.0f}%")
    )


def _row(arm: Arm, a: Analysis, compiled: bool) -> list[str]:
    return [
        arm.runtime,
        str(arm.n),
        interval(arm.rate, 1),
        _ratio(arm, a.baseline),
        _precision(arm, a.precision_target),
        arm.method or "-",
        percent(arm.detectable),
        arm.verdict,
        interval(arm.startup, 2),
        *([(interval(arm.compile, 1) if arm.compile else "n/a")] if compiled else []),
        _load(arm),
        f"{arm.peak_rss_mb:.0f}" if arm.peak_rss_mb else "n/a",  # a command reports none
        arm.framework,
        arm.mpi,
    ]


PAIRS = "Every other pair (ratio: the row's runtime over the other, same family):"

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
        interval(arm.ratio, 3) if arm.ratio else "n/a",
        _precision(arm, a.precision_target),
        arm.method or "-",
        percent(arm.detectable),
        arm.verdict,
    ]


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


def raw(a: Analysis) -> Table:
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
