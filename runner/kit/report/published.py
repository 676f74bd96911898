"""A preset's report: its folder's legs read together, and each figure the study
published beside what this machine measured, judged from the measured interval alone.

Everything comes from the folder: preset.json (what the preset's run saved: its name,
baseline, legs and published figures, as run) and its legs' folders (OUT/LEG, and
OUT/LEG-nodes for a leg run again across a host list).
"""

from dataclasses import dataclass
from pathlib import Path

from kit.analysis import stats
from kit.analysis.findings import Analysis
from kit.core.errors import KitError
from kit.results import store
from kit.run import presets


def expand(out_dirs: list[Path]) -> tuple[list[Path], dict | None]:
    """Results folders with each preset folder replaced by its legs' folders; the first
    preset found, as its preset.json holds it (its baseline and published figures go into
    the report)."""
    dirs: list[Path] = []
    found = None
    for d in out_dirs:
        saved = store.saved_preset(d)
        if saved is None:
            dirs.append(d)
            continue
        legs = _legs(d, saved)
        if not legs:
            raise KitError(f"no leg of preset {saved['name']} in {d} has trials yet; run it first")
        found = found or saved
        dirs += legs
    return dirs, found


def _legs(out_dir: Path, saved: dict) -> list[Path]:
    """The folders of a preset's legs that hold trials: each leg's, in the preset's order,
    then each that ran again across a host list. preset.json is checked as the preset's
    TOML is (a hand edit: a leg named ../x, a figure without its measure)."""
    if why := presets.problem(saved, "legs"):
        path = out_dir / store.PRESET_FILE
        raise KitError(f"{path} is not what a preset's run saves ({why}); run it again")
    legs = [(x["name"], bool(x.get("hosts"))) for x in saved["legs"]]
    names = [name for name, _ in legs] + [name + store.NODES for name, across in legs if across]
    return [out_dir / name for name in names if store.has_trials(out_dir / name)]


@dataclass(frozen=True)
class Row:
    """One published figure beside what this machine measured, and what that says."""

    published: dict  # one of preset.json's published figures
    measured: str
    finding: str


def _matches(key, want: dict) -> bool:
    """Whether a group (or an out-of-memory entry) is what a claim measures: its fields
    equal, its benchmark and image among those named (a claim about the studies' stacks
    names their images, so a today's-stack leg of the same preset is not taken for them)."""
    for field in ("model", "ranks", "data", "batch_size"):
        if field in want and _get(key, field) != want[field]:
            return False
    return all(f not in want or _get(key, f) in want[f].split(",") for f in ("bench", "image"))


def _get(key, field: str):
    return key[field] if isinstance(key, dict) else getattr(key, field)


def _judge(iv: stats.Interval, expect: float, null: float) -> str:
    """agrees, disagrees or cannot tell, from the measured interval alone."""
    if iv.short:
        return "cannot speak: too few trials for an interval"
    if not iv.low <= expect <= iv.high:
        return "disagrees: the published figure is outside the measured interval"
    if iv.low <= null <= iv.high:
        return "cannot speak: the interval holds both the published figure and no effect"
    return "agrees: the published figure is inside the measured interval"


def _ratio(a: Analysis, m: dict) -> stats.Interval | None:
    for g in a.groups:
        if not _matches(g.key, m):
            continue
        for arm in [*g.arms, *g.pairs]:
            if arm.ratio is None:
                continue
            if (arm.runtime, arm.against) == (m["arm"], m["over"]):
                return arm.ratio
            if (arm.runtime, arm.against) == (m["over"], m["arm"]):
                r = arm.ratio
                return stats.Interval(1 / r.value, 1 / r.high, 1 / r.low, r.coverage, r.wanted)
    return None


def _bench_ratio(a: Analysis, m: dict) -> stats.Interval | None:
    """images/s of one benchmark over another's at the same ranks, model and runtime
    (e.g. Horovod's tf-cnn over tf-ps): the ratio of medians, bootstrapped."""
    found = {}
    for g in a.groups:
        if g.key.bench in (m["bench"], m["over"]) and _matches(g.key, {**m, "bench": g.key.bench}):
            arms = [x for x in g.arms if x.runtime == m["runtime"]]
            if arms:
                found[g.key.bench] = arms[0].rates
    if len(found) < 2:
        return None
    return stats.ratio_ci(found[m["bench"]], found[m["over"]], a.confidence)


def _row(a: Analysis, p: dict) -> Row:
    m = p["measure"]
    kind = m["kind"]
    spread = ""  # a scaling claim: which run it was read from
    if kind == "elsewhere":  # what it compares does not exist on this kind of machine
        return Row(p, "not measurable here", f"cannot speak: {m['why']}")
    if kind == "oom":
        ran = [
            g
            for g in a.groups
            if _matches(g.key, {k: v for k, v in m.items() if k != "batch_size"})
        ]
        hit = [o for o in a.oom if _matches(o, {k: v for k, v in m.items() if k != "batch_size"})]
        at = [o for o in hit if o["batch_size"] <= m["batch_size"]]
        largest = max((g.key.batch_size for g in ran), default=0)
        if at:
            sizes = sorted({o["batch_size"] for o in at})
            return Row(p, f"out of memory at batch {sizes}", "agrees: it did not fit here either")
        if largest >= m["batch_size"]:
            return Row(
                p, f"fits up to batch {largest}", "disagrees: that batch size fits on this machine"
            )
        return Row(
            p,
            f"largest batch run: {largest or 'none'}",
            f"cannot speak: batch {m['batch_size']} was not run here (--full runs it)",
        )
    if kind == "ratio":
        iv = _ratio(a, m)
        null = 1.0
    elif kind == "bench_ratio":
        iv = _bench_ratio(a, m)
        null = 1.0
    elif kind == "efficiency":  # the run that spans the most nodes, then the runtime named first
        named = m["runtime"].split(",")
        found = [s for s in a.scaling if _matches(s.key, m) and s.runtime in named]
        found.sort(key=lambda s: (-s.nodes, named.index(s.runtime)))
        iv = found[0].efficiency if found else None
        null = 1.0
        if found:
            span = f"{found[0].nodes} nodes" if found[0].nodes > 1 else "one host"
            spread = f" ({found[0].runtime}, {span})"
    else:
        found = [x for x in a.io if _matches(x.key, m) and x.runtime == m["runtime"]]
        iv = found[0].overhead if found else None
        null = 0.0
    if iv is None:
        where = ", ".join(f"{k}={v}" for k, v in m.items() if k != "kind")
        return Row(p, "not measured", f"cannot speak: no {kind} measured for {where}")
    value = f"{iv.value:.3f} [{iv.low:.3f}, {iv.high:.3f}]{spread}"
    if isinstance(p["value"], str):
        return Row(
            p, value, "no figure published (figure-only): the measured value is for the reader"
        )
    expect = p.get("expect")
    return Row(p, value, _judge(iv, p["value"] if expect is None else expect, null))


def _figure(p: dict) -> str:
    return p["value"] if isinstance(p["value"], str) else f"{p['value']:g} {p['unit']}"


def published(a: Analysis, figures: list[dict]) -> list[dict]:
    """The report's published-beside-measured rows, as plain data for every format, of a
    preset's published figures (preset.json's "published")."""
    return [
        {
            "claim": r.published["claim"],
            "published": _figure(r.published),
            "setting": r.published["setting"],
            "source": r.published["source"],
            "measured": r.measured,
            "finding": r.finding,
        }
        for r in (_row(a, p) for p in figures)
    ]
