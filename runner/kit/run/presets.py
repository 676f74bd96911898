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
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from kit.core.errors import KitError
from kit.core.paths import repo_root
from kit.results import store
from kit.results.findings import REFERENCE
from kit.run import options
from kit.run.checks import RunRequest, given

KINDS = ("ratio", "bench_ratio", "efficiency", "io_overhead", "oom", "elsewhere")


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
