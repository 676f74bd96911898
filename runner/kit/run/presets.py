"""The studies' experiments as presets: a campaign per leg, and the published figures
(judged against the measured ones by report.published, from the preset.json saved here).

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
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from kit.analysis.findings import REFERENCE
from kit.core import inputs, schema
from kit.core.errors import KitError
from kit.core.paths import repo_root
from kit.results import store
from kit.run import options
from kit.run.checks import RunRequest, given

# Each kind of measure a published figure names: the keys the report reads of it, by type
MEASURES: dict[str, dict[str, type]] = {
    "ratio": {"arm": str, "over": str},
    "bench_ratio": {"bench": str, "over": str, "runtime": str},
    "efficiency": {"runtime": str},
    "io_overhead": {"runtime": str},
    "oom": {"batch_size": int},
    "elsewhere": {"why": str},
}
KINDS = tuple(MEASURES)
# What any measure may narrow its figure to (bench and image: a comma-separated list)
FILTERS = {"bench": str, "image": str, "model": str, "data": str, "ranks": int, "batch_size": int}


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
    fix = "compare it with the others"
    raw = inputs.read_toml(path, f"preset {path}", fix, "a preset")
    if why := problem(raw, "leg"):
        raise KitError(f"preset {path}: {why}; {fix}")
    legs = [
        Leg(x["name"], x["image"], list(x["args"]), list(x["full"]), list(x.get("hosts", [])))
        for x in raw["leg"]
    ]
    published = [Published(**x) for x in raw["published"]]
    return Preset(
        name, raw["title"], raw["question"], raw["minutes"], raw["baseline"], legs, published
    )


def problem(raw: object, legs: str) -> str | None:
    """Why a preset's settings are not ones kit runs and reports, or None: its TOML (legs
    under "leg"), or the preset.json its run saved (under "legs"), which a hand may edit. A
    leg's name is its folder, OUT/LEG: a name, never a path."""
    if not isinstance(raw, dict):
        return f"a JSON {type(raw).__name__}, not a preset's settings"
    for key in ("title", "question", "baseline"):
        if not isinstance(raw.get(key), str):
            return f"{key} is missing or not a text"
    minutes = raw.get("minutes")
    if not isinstance(minutes, int) or isinstance(minutes, bool) or minutes < 1:
        return f"minutes {minutes!r} is not a whole number above 0"
    if not isinstance(raw.get(legs), list) or not raw[legs]:
        return f"{legs} is missing or not a list of legs"
    for leg in raw[legs]:
        if why := _leg_problem(leg):
            return why
    if len({leg["name"] for leg in raw[legs]}) < len(raw[legs]):
        return "two legs have one name (one folder, OUT/LEG)"
    if not isinstance(raw.get("published"), list):
        return "published is missing or not a list of figures"
    for figure in raw["published"]:
        if why := _published_problem(figure):
            return why
    return None


def _leg_problem(leg: object) -> str | None:
    if not isinstance(leg, dict):
        return f"a leg is a {type(leg).__name__}, not a table"
    name = leg.get("name")
    if not isinstance(name, str) or not schema.NAME.fullmatch(name):
        return f"leg name {name!r} is not a folder's name (it must match {schema.NAME.pattern})"
    if not isinstance(leg.get("image"), str):
        return f"leg {name}: image is missing or not a text"
    for key in ("args", "full", "hosts"):
        value = leg.get(key, [] if key == "hosts" else None)
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            return f"leg {name}: {key} is missing or not a list of texts"
    return None


def _published_problem(figure: object) -> str | None:
    if not isinstance(figure, dict) or not isinstance(figure.get("claim"), str):
        return "a published figure is not a table with its claim"
    said = f"published '{figure['claim']}'"
    if unknown := sorted(figure.keys() - {f.name for f in dataclasses.fields(Published)}):
        return f"{said}: unknown key(s) {', '.join(map(str, unknown))}"
    for key in ("unit", "setting", "source"):
        if not isinstance(figure.get(key), str):
            return f"{said}: {key} is missing or not a text"
    if not isinstance(figure.get("value"), str) and not _finite(figure.get("value")):
        return f"{said}: value is neither a finite number nor the claim's words"
    if figure.get("expect") is not None and not _finite(figure["expect"]):
        return f"{said}: expect is not a finite number"
    m = figure.get("measure")
    if not isinstance(m, dict) or not isinstance(m.get("kind"), str) or m["kind"] not in MEASURES:
        return f"{said} has no measure kind ({', '.join(KINDS)})"
    wanted = MEASURES[m["kind"]]
    if missing := sorted(wanted.keys() - m.keys()):
        return f"{said}: a {m['kind']} measure names {', '.join(missing)}"
    for key, value in m.items():
        kind = wanted.get(key) or FILTERS.get(key) or (str if key == "kind" else None)
        if kind is None:
            known = ", ".join(["kind", *wanted, *(k for k in FILTERS if k not in wanted)])
            return f"{said}: unknown measure key {key!r} (known: {known})"
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"{said}: measure {key} {value!r} is not a {kind.__name__}"
    return None


def _finite(value: object) -> bool:
    """A number the report can print and compare (an int too long for a float is none)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def legs(preset: Preset, across: bool) -> list[Leg]:
    """The legs to run: each as declared, and with a host list (across) those that say how
    they run across nodes a second time, as LEG-nodes (their options: the leg's `hosts`)."""
    nodes = [
        Leg(x.name + store.NODES, x.image, x.hosts, [], across=True)
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
    where: dict | None = None,
    dry_run: bool = False,
    resume: bool = False,
) -> list[str]:
    """The `kit run` arguments of one leg, filed under the preset's results folder, as the
    preset's run shows them; request() is the same leg as the run takes it."""
    flags = {o.dest: o.flag for o in options.OPTIONS}
    said = [x for dest, value in _said(preset, where).items() for x in (flags[dest], str(value))]
    args = [
        "run",
        leg.image,
        *(leg.full if full else leg.args),
        *said,
        "--out",
        str(out / leg.name),
    ]
    if dry_run:
        args.append("--dry-run")
    elif _resumes(leg, out, resume):
        args.append("--resume")
    return args


def request(
    preset: Preset,
    leg: Leg,
    out: Path,
    full: bool,
    *,
    where: dict | None = None,
    dry_run: bool = False,
    resume: bool = False,
) -> RunRequest:
    """One leg's `kit run` request: its options in the preset (read by kit run's options
    table), its image and folder OUT/LEG, the preset's baseline, which the run's --precision
    waits for, unless native, and where: the user's options that say where the leg runs
    (a host list for a LEG-nodes leg, the site file for a Slurm leg), by dest. With resume,
    a leg that has started continues and one that has not starts afresh."""
    try:
        own = RunRequest.parse(leg.full if full else leg.args)
        if flag := given(own, options.PRESET, options.WHERE):
            raise KitError(f"{flag} is the preset run's to say, not a leg's")
    except KitError as e:
        raise KitError(
            f"preset {preset.name}, leg {leg.name}: {e}; compare it with the others"
        ) from None
    return dataclasses.replace(
        own,
        image=leg.image,
        **_said(preset, where),
        out=out / leg.name,
        dry_run=dry_run,
        resume=not dry_run and _resumes(leg, out, resume),
    )


def _said(preset: Preset, where: dict | None) -> dict:
    """What the preset's run adds to a leg's own options, by dest, in the leg's order."""
    return ({} if preset.baseline == REFERENCE else {"baseline": preset.baseline}) | (where or {})


def _resumes(leg: Leg, out: Path, resume: bool) -> bool:
    return resume and store.has_campaign(out / leg.name)


def save(preset: Preset, out: Path, full: bool) -> None:
    store.save_preset(out, {**asdict(preset), "full": full})
