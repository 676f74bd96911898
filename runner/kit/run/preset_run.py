"""`kit run --preset NAME`: the options a preset takes from the user checked, then each
leg a campaign of its own in OUT/LEG (its request built from the preset, run as any
campaign is), then the preset's report, the folder held throughout."""

from collections.abc import Callable
from pathlib import Path

from kit.core.errors import KitError
from kit.core.log import logger
from kit.results import runlock, store
from kit.run import options, presets, request, start
from kit.run.checks import RunRequest, given

log = logger(__name__)


def run(q: RunRequest, report: Callable[[Path], None]) -> None:
    """The preset's legs, across the user's host list too when given; then report(OUT),
    the report of the preset's folder (the report stage's, which this one cannot import)."""
    p = check(q)
    out = q.out or store.new_folder(p.name)
    if q.dry_run:
        runlock.check_out(out)
        _legs(q, p, out)
        return
    with runlock.held(out):  # legs lock their own folders inside it
        presets.save(p, out, q.full)
        _legs(q, p, out)
        report(out)


def check(q: RunRequest) -> presets.Preset:
    """The preset the request names, or a KitError naming the option it cannot take: a
    preset sets its legs' options; the user says only where they run and where results go."""
    if q.image is not None:
        raise KitError(f"--preset {q.preset} names its own images; drop '{q.image}'")
    if flag := given(q, options.CAMPAIGN, options.KIT_BENCH, options.COMMAND):
        raise KitError(f"--preset {q.preset} sets the campaign's options; drop {flag}")
    p = presets.load(q.preset)
    listed = "--hosts" if q.hosts is not None else "--hostfile"  # the one given
    if _across(q) and q.full:
        raise KitError(
            f"--full runs the study's sizes as Slurm jobs, not over a host list: drop {listed}, "
            "and give --slurm-config a file with tasks_per_node = 1 for one rank a node"
        )
    if _across(q) and not any(leg.hosts for leg in p.legs):
        raise KitError(f"preset {p.name} has no leg that runs across nodes; drop {listed}")
    if q.slurm_config is not None and not q.full:
        raise KitError("--slurm-config goes with --full, whose legs are Slurm jobs")
    return p


def _across(q: RunRequest) -> bool:
    return q.hosts is not None or q.hostfile is not None


def _where(q: RunRequest, leg: presets.Leg) -> dict:
    """The user's options that say where a leg runs, by dest: the host list for a
    LEG-nodes leg, the site file for the study's Slurm legs (--full)."""
    if leg.across:
        return {"hosts": q.hosts} if q.hosts is not None else {"hostfile": q.hostfile}
    return {"slurm_config": q.slurm_config} if q.slurm_config is not None else {}


def _legs(q: RunRequest, p: presets.Preset, out: Path) -> None:
    """Each leg as its own campaign in OUT/LEG, said first as its kit run line; every leg
    checked before the first runs (checking is pure: a later leg's mistake costs nothing)."""
    todo = presets.legs(p, _across(q))
    how = {"dry_run": q.dry_run, "resume": q.resume}
    wheres = [_where(q, leg) for leg in todo]
    asked = [
        presets.request(p, leg, out, q.full, where=w, **how)
        for leg, w in zip(todo, wheres, strict=True)
    ]
    checked = []
    for leg, r in zip(todo, asked, strict=True):
        try:
            checked.append(request.check(r))
        except KitError as e:
            raise KitError(f"preset {p.name}, leg {leg.name}: {e}") from None
    for i, (leg, w, r, c) in enumerate(zip(todo, wheres, asked, checked, strict=True), 1):
        args = " ".join(presets.argv(p, leg, out, q.full, where=w, **how))
        log.info(f"==> {p.name} {i}/{len(todo)}: kit {args}")
        start.run(r, c)
