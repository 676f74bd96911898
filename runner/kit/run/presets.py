"""The studies' experiments as presets: a campaign per leg, and the published figures.

A preset (recipes/presets/NAME.toml) names the `kit run` options of each leg
(one image each), sized for a 2-core machine, and the papers' own sizes under
`full`; and each figure the study published, with what it is comparable to here:
a ratio of two arms (runtimes, or benchmarks such as Horovod over parameter
server), a scaling efficiency, an I/O overhead, or whether a batch size ran out of
memory. Absolute images/s are never compared across hardware. A study's claim
with no figure (figure-only results) is shown with what was measured beside it
and judged by no one.

The studies ran on many nodes. A leg may say how it runs across nodes (`hosts`: one
rank a node, the hybrid runtimes); given a host list, the preset runs such a leg a
second time over it, as LEG-nodes, and a scaling claim is read from the run that spans
the most nodes.
"""

import dataclasses
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from kit.core.errors import KitError
from kit.core.paths import repo_root
from kit.results import stats, store
from kit.results.analysis import REFERENCE, Analysis

KINDS = ("ratio", "bench_ratio", "efficiency", "io_overhead", "oom", "elsewhere")


NODES = "-nodes"  # the suffix of a leg's run across the host list


@dataclass(frozen=True)
class Leg:
    name: str
    image: str
    args: list[str]
    full: list[str]
    hosts: list[str] = dataclasses.field(default_factory=list)  # its options across nodes
    across: bool = False  # a LEG-nodes run of legs(): over the user's host list


@dataclass(frozen=True)
class Published:
    claim: str
    value: float | str  # a figure, or the claim's words where the study gave none
    unit: str
    setting: str
    source: str
    measure: dict  # kind and the filters that find the measured figure
    expect: float | None = None  # the claim on the measured figure's scale


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    question: str
    minutes: int
    baseline: str
    legs: list[Leg]
    published: list[Published]


def folder() -> Path:
    return repo_root() / "recipes" / "presets"


def names() -> list[str]:
    return sorted(p.stem for p in folder().glob("*.toml"))


def load(name: str) -> Preset:
    path = folder() / f"{name}.toml"
    if name not in names():  # a name, never a path: --preset and preset.json give it
        raise KitError(f"no preset '{name}' (known: {', '.join(names())}); see kit presets")
    try:
        raw = tomllib.loads(path.read_text())
        legs = [
            Leg(x["name"], x["image"], list(x["args"]), list(x["full"]), list(x.get("hosts", [])))
            for x in raw["leg"]
        ]
        published = [Published(**x) for x in raw.get("published", [])]
        preset = Preset(
            name,
            raw["title"],
            raw["question"],
            int(raw["minutes"]),
            raw["baseline"],
            legs,
            published,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise KitError(f"preset {path} is malformed ({e!r}); compare it with the others") from None
    for p in published:
        if p.measure.get("kind") not in KINDS:
            raise KitError(f"preset {path}: '{p.claim}' has no measure kind ({', '.join(KINDS)})")
    return preset


def legs(preset: Preset, across: bool) -> list[Leg]:
    """The legs to run: each as declared, and with a host list (across) those that say how
    they run across nodes a second time, as LEG-nodes (their options: the leg's `hosts`)."""
    nodes = [
        Leg(x.name + NODES, x.image, x.hosts, [], across=True)
        for x in preset.legs
        if across and x.hosts
    ]
    return [*preset.legs, *nodes]


def argv(
    preset: Preset,
    leg: Leg,
    out: Path,
    full: bool,
    *,
    where: list[str] | None = None,
    dry_run: bool = False,
    resume: bool = False,
) -> list[str]:
    """The `kit run` arguments of one leg, filed under the preset's results folder; a
    baseline other than native goes to the run, whose --precision waits for it. where:
    the user's options that say where the leg runs (a host list for a LEG-nodes leg, the
    site file for a Slurm leg). With resume, a leg that has started continues and one that
    has not starts afresh."""
    own = [] if preset.baseline == REFERENCE else ["--baseline", preset.baseline]
    options = leg.full if full else leg.args
    args = ["run", leg.image, *options, *own, *(where or []), "--out", str(out / leg.name)]
    if dry_run:
        args.append("--dry-run")
    elif resume and store.has_campaign(out / leg.name):
        args.append("--resume")
    return args


def save(preset: Preset, out: Path, full: bool) -> None:
    store.save_preset(out, {**asdict(preset), "full": full})


def saved(out: Path) -> tuple[Preset, list[Path]] | None:
    """The preset a results folder holds (None: a plain campaign), and its legs' folders
    that have trials."""
    raw = store.saved_preset(out)
    if raw is None:
        return None
    preset = load(raw["name"])
    return preset, [out / x.name for x in legs(preset, True) if store.has_trials(out / x.name)]


@dataclass(frozen=True)
class Row:
    """One published figure beside what this machine measured, and what that says."""

    published: Published
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


def _row(a: Analysis, p: Published) -> Row:
    m = p.measure
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
    if isinstance(p.value, str):
        return Row(
            p, value, "no figure published (figure-only): the measured value is for the reader"
        )
    return Row(p, value, _judge(iv, p.expect if p.expect is not None else p.value, null))


def _figure(p: Published) -> str:
    return p.value if isinstance(p.value, str) else f"{p.value:g} {p.unit}"


def published(a: Analysis, preset: Preset) -> list[dict]:
    """The report's published-beside-measured rows, as plain data for every format."""
    return [
        {
            "claim": r.published.claim,
            "published": _figure(r.published),
            "setting": r.published.setting,
            "source": r.published.source,
            "measured": r.measured,
            "finding": r.finding,
        }
        for r in (_row(a, p) for p in preset.published)
    ]


def expand(out_dirs: list[Path]) -> tuple[list[Path], Preset | None]:
    """Results folders with each preset folder replaced by its legs' folders; the first
    preset found (its baseline and published figures go into the report)."""
    dirs: list[Path] = []
    found = None
    for d in out_dirs:
        got = saved(d)
        if got is None:
            dirs.append(d)
            continue
        preset, legs = got
        if not legs:
            raise KitError(f"no leg of preset {preset.name} in {d} has trials yet; run it first")
        found = found or preset
        dirs += legs
    return dirs, found
