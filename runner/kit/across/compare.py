"""`kit compare A B`: how each runtime's overhead, and native's own throughput, changed
from one set of campaigns (A) to another (B).

Within a campaign every arm runs in every round, so an arm's per-round log ratio to
native carries none of the round's drift; across campaigns nothing is paired (other
days, hosts, versions), so A's and B's per-round log ratios are two independent
samples. The change is B's geometric mean ratio over A's, exp(mean_B - mean_A), with
the union of Welch's t interval and the Hodges-Lehmann shift's exact Mann-Whitney
interval (docs/statistics.md says why both); native's own throughput is compared the
same way on its per-round log rates. All the intervals of one comparison form a family,
Bonferroni-adjusted, so every verdict holds together at the stated confidence.
"""

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field, fields
from pathlib import Path

from kit.analysis import screen, stats
from kit.analysis.findings import REFERENCE
from kit.analysis.values import by_round, figured
from kit.core import benches, columns
from kit.core.errors import KitError
from kit.core.schema import printable
from kit.results import catalogue, record, selection, store
from kit.results.record import Key, Trial


@dataclass(frozen=True)
class Side:
    """One side of a comparison: a results folder or a catalogue selection."""

    label: str
    records: list[Trial]

    @property
    def campaigns(self) -> int:
        return len({t.campaign for t in self.records})


def side(text: str, path: Path | None) -> Side:
    """A results folder (its campaign, or a preset's legs) or a catalogue selection such
    as host=nodeA,since=2026-11-01 (read from the catalogue at path)."""
    folder = Path(text)
    if folder.is_dir():
        trials: list[Trial] = []
        seen: set[str] = set()
        for d in catalogue.folders([folder]):
            store.settings(d)  # a campaign.json the report refuses, compare refuses too
            trials += record.distinct(store.load(d).records, seen)[0]
        return Side(text, trials)
    sel = selection.parse(text)
    if path is None:
        raise KitError(f"'{text}' is a selection, and the catalogue is off; give --catalogue")
    listed, records = selection.select(path, sel)
    if not listed:
        raise KitError(f"'{text}' selects no campaign of {path}; kit results ls lists them")
    return Side(text, records)


def renames(given: list[str]) -> dict[str, str]:
    """--as ARM=NAME, each: the arm counted as NAME on both sides."""
    out = {}
    for text in given:
        arm, sep, name = (x.strip() for x in text.partition("="))
        if not sep or not arm or not name or "=" in name:
            raise KitError(f"--as '{text}' must be ARM=NAME, e.g. docker@cut10=docker")
        if arm in out:  # the last would silently win
            raise KitError(f"--as counts {arm} as {out[arm]} and as {name}; give it one name")
        out[arm] = name
    return out


@dataclass(frozen=True)
class Samples:
    """One configuration of one side: native's per-round log rate and each other arm's
    per-round log ratio to native (by arm name), and what native's figure is."""

    logs: dict[str, list[float]]
    unit: str  # e.g. images/s


def samples(s: Side, renamed: dict[str, str]) -> dict[Key, Samples]:
    """Per configuration with a native arm, its Samples over the launches the report
    keeps (screen)."""
    measured = [t for t in s.records if not t.warmup and t.status == "ok"]
    ok, _ = figured([t for t in measured if not benches.is_sweep(t.bench)])
    counted: dict[str, list[str]] = defaultdict(list)  # each name, the arms counted as it
    for arm in sorted({t.runtime for t in ok}):
        counted[renamed.get(arm, arm)].append(arm)
    for name, arms in counted.items():
        if len(arms) > 1:  # docker@a=x and docker@b=x as well as docker@a=docker
            said = " ".join(f"--as {arm}={name}" for arm in arms if arm != name)
            raise KitError(f"{said}: {s.label} has {' and '.join(arms)}; it would pool them")
    by_key: dict[Key, dict[str, list[Trial]]] = defaultdict(lambda: defaultdict(list))
    for t in ok:
        by_key[Key(**record.key_values(t))][renamed.get(t.runtime, t.runtime)].append(t)
    out = {}
    for key, by_rt in by_key.items():
        if REFERENCE not in by_rt:
            continue
        kept = screen.kept(by_rt)
        base = by_round(kept[REFERENCE])
        logs = {REFERENCE: [math.log(base[k]) for k in sorted(base)]}
        for rt, rs in sorted(kept.items()):
            mine = by_round(rs)
            if rt != REFERENCE:
                logs[rt] = [math.log(mine[k] / base[k]) for k in sorted(mine.keys() & base)]
        first = by_rt[REFERENCE][0]
        out[key] = Samples(logs, benches.metric(first.bench, first.result).unit)
    return out


def change(a: list[float], b: list[float], conf: float) -> stats.Interval | None:
    """exp(mean b - mean a) with the union of Welch's t interval (at its fractional
    Welch-Satterthwaite degrees of freedom) and the Mann-Whitney interval of the
    Hodges-Lehmann shift; None with fewer than stats.MIN_ROUNDS values a side."""
    if min(len(a), len(b)) < stats.MIN_ROUNDS:
        return None
    d = statistics.fmean(b) - statistics.fmean(a)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    half = 0.0
    if va + vb > 0:
        df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
        half = stats.t_quantile(0.5 + conf / 2, df) * math.sqrt(va + vb)
    rank = stats.two_sample_shift_ci(b, a, conf)
    low, high = min(d - half, rank.low), max(d + half, rank.high)
    return stats.Interval(math.exp(d), math.exp(low), math.exp(high), conf, conf)


def _pct(x: float) -> str:
    return f"{(x - 1) * 100:+.1f} %"


def verdict(iv: stats.Interval | None) -> str:
    """'changed by x % [lo, hi]' where the interval excludes no change, else the largest
    change it leaves possible."""
    if iv is None:
        return f"too few rounds (need {stats.MIN_ROUNDS} on each side)"
    if iv.low > 1 or iv.high < 1:
        return f"changed by {_pct(iv.value)} [{_pct(iv.low)}, {_pct(iv.high)}]"
    return f"no change larger than ±{max(iv.high - 1, 1 - iv.low) * 100:.1f} %"


@dataclass
class Change:
    key: Key
    runtime: str
    measure: str  # "ratio to native", or native's own metric (e.g. images/s)
    a: float  # A's geometric mean of it
    b: float
    rounds: tuple[int, int]
    interval: stats.Interval | None  # B over A, at the family's confidence a comparison
    verdict: str


@dataclass
class Comparison:
    a: str
    b: str
    campaigns: tuple[int, int]
    confidence: float
    each: float
    changes: list[Change] = field(default_factory=list)
    only: list[str] = field(default_factory=list)  # configurations one side alone measured


def describe(key: Key) -> str:
    """A configuration as a heading: what ran, and each other key value that is not the
    usual one (real data, Slurm, cuda, benchmark options, the steps when known)."""
    usual = {"data": "synthetic", "launcher": "local", "variant": "cpu", "bench_args": "",
             "metric": "", "command": ""}  # fmt: skip
    rest = [
        f"{f.name} {v}"
        for f in fields(key)
        if f.name not in ("image", "bench", "model", "batch_size", "ranks")
        and (v := getattr(key, f.name)) not in (usual.get(f.name), None)
    ]
    head = f"{key.image} {key.bench} {key.model}, batch {key.batch_size}, {key.ranks} rank(s)"
    return printable(", ".join([head, *rest]))  # a record's text: escaped, one line


def _difference(a: Key, b: Key) -> str:
    return "; ".join(
        f"{f.name} {getattr(a, f.name)!r} in A, {getattr(b, f.name)!r} in B"
        for f in fields(a)
        if getattr(a, f.name) != getattr(b, f.name)
    )


def _apart(a: Side, b: Side, renamed: dict[str, str]) -> None:
    """A KitError where the two sides are not two samples: a campaign on both (compare G2
    G2 would compare its trials with themselves), or an --as naming an arm neither has
    (ignored, it would have compared what the user did not mean)."""
    if both := sorted({t.campaign for t in a.records} & {t.campaign for t in b.records}):
        same = "the same trials" if a.records == b.records else "trials of the same campaign"
        raise KitError(
            f"A ({printable(a.label)}) and B ({printable(b.label)}) hold {same} (campaign "
            f"{printable(', '.join(both))}): a campaign compared with itself is one sample, "
            "not two; compare it with other campaigns, or read its own report"
        )
    arms = {t.runtime for t in a.records + b.records}
    if unknown := sorted(renamed.keys() - arms):
        raise KitError(
            f"--as names {printable(', '.join(unknown))}, an arm of neither side (arms: "
            f"{printable(', '.join(sorted(arms)))}); give --as an arm the campaigns ran"
        )


def compare(a: Side, b: Side, conf: float = 0.95, renamed: dict | None = None) -> Comparison:
    """Every runtime both sides measured in a configuration both measured, and native."""
    _apart(a, b, renamed or {})
    sa, sb = samples(a, renamed or {}), samples(b, renamed or {})
    for s, found in ((a, sa), (b, sb)):
        if not found:
            raise KitError(f"{s.label} holds no ok trial with a native arm to compare against")
    common = sorted(sa.keys() & sb.keys(), key=Key.order)
    if not common:
        closest = min(
            ((x, y) for x in sa for y in sb), key=lambda p: len(_difference(*p).split("; "))
        )
        raise KitError(
            f"A and B measured different configurations ({_difference(*closest)}); compare "
            "campaigns of the same configuration"
        )
    pairs = [(k, rt) for k in common for rt in sa[k].logs if rt in sb[k].logs]
    each = stats.family_confidence(conf, len(pairs))
    out = Comparison(a.label, b.label, (a.campaigns, b.campaigns), conf, each)
    out.only = [f"only in A: {describe(k)}" for k in sa.keys() - sb.keys()]
    out.only += [f"only in B: {describe(k)}" for k in sb.keys() - sa.keys()]
    for key, rt in pairs:
        x, y = sa[key].logs[rt], sb[key].logs[rt]
        iv = change(x, y, each)
        measure = "ratio to native" if rt != REFERENCE else sa[key].unit
        mean_a, mean_b = (math.exp(statistics.fmean(v)) if v else math.nan for v in (x, y))
        out.changes.append(
            Change(key, rt, measure, mean_a, mean_b, (len(x), len(y)), iv, verdict(iv))
        )
    return out


def text(c: Comparison) -> str:
    """The comparison as kit prints it: per configuration, a line a runtime."""
    lines = [
        f"A: {printable(c.a)} ({c.campaigns[0]} campaign(s))",
        f"B: {printable(c.b)} ({c.campaigns[1]} campaign(s))",
    ]
    head = ("RUNTIME", "MEASURE", "A", "B", "ROUNDS", "B/A", "INTERVAL", "VERDICT")
    for key in dict.fromkeys(ch.key for ch in c.changes):
        rows = [head]
        for ch in (x for x in c.changes if x.key == key):
            iv = ch.interval
            rounds = f"{ch.rounds[0]}/{ch.rounds[1]}"
            rows.append((
                ch.runtime, ch.measure, f"{ch.a:.4g}", f"{ch.b:.4g}", rounds,
                f"{iv.value:.3f}" if iv else "-",
                f"[{iv.low:.3f}, {iv.high:.3f}]" if iv else "-", ch.verdict,
            ))  # fmt: skip
        lines += ["", describe(key), *columns.aligned(rows, indent="  ")]
    lines += ["", *c.only] if c.only else []
    lines.append(
        f"\neach interval at {c.each:.2%} (Bonferroni over {len(c.changes)} comparison(s)): "
        f"all hold together at {c.confidence:.0%}"
    )
    return "\n".join(lines) + "\n"
