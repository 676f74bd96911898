"""`kit run`'s loop: what is checked before the first trial, then the design's rounds
(kit.run.plan), each trial run and filed (kit.run.trial), until the stop rule says so."""

import dataclasses
import shutil
import time
from collections import Counter
from pathlib import Path

from kit.across import history
from kit.core import units
from kit.core.errors import KitError, RunFailed
from kit.core.log import logger
from kit.image.foreign import Foreign
from kit.image.recipes import Recipe
from kit.launch import launchers
from kit.results import catalogue, store
from kit.results.record import Trial
from kit.run import progress, trial
from kit.run.plan import (
    Design,
    Options,
    auto_min_time,
    next_trial,
    seconds_left,
    short_budget,
    stop_reason,
)
from kit.runtimes import Prepared, Runtime, gpu
from kit.runtimes.base import check_env, user_env

log = logger(__name__)


def unsuccessful(records: list[Trial]) -> list[str]:
    """Arms none of whose measured trials succeeded, each with how its trials ended, e.g.
    'docker (3 failed, 1 timeout)'; running out of memory is a result, not a failure."""
    ends: dict[str, Counter] = {}
    for t in records:
        if not t.warmup:
            ends.setdefault(t.runtime, Counter())[t.status] += 1
    return [
        f"{arm} ({', '.join(f'{n} {status}' for status, n in sorted(c.items()))})"
        for arm, c in ends.items()
        if not c["ok"] and not c["oom"]
    ]


def register(out_dir: Path) -> None:
    """File the campaign in the results catalogue (catalogue.default_path()). Its records
    are safe in out_dir whatever happens here, so a catalogue that cannot take it costs
    one warning line, never the campaign."""
    path = catalogue.default_path()
    if path is None:
        return
    try:
        catalogue.add(path, [out_dir])
    except Exception as e:  # any failure at all: the campaign itself has ended as it did
        log.warning(
            f"kit: warning: campaign not registered in the catalogue {path}: {e}; "
            f"kit results add {out_dir} registers it later"
        )
    else:
        history.warm(path, out_dir)  # its overheads, for kit history


def mpirun_for(recipe: Recipe, override: str | None) -> str:
    """The host launcher: --mpirun, else the recipe flavour's own (mpirun.mpich), else mpirun."""
    if override:
        return override
    for name in (recipe.mpi.spec.mpirun, "mpirun"):
        if shutil.which(name):
            return name
    return recipe.mpi.spec.mpirun


def launcher_for(opts: "Options", recipe: Recipe, out_dir: Path) -> launchers.Launcher:
    """Local by default (mpirun), or torchrun; under --launcher slurm one batch job a
    trial, scripts in OUT/slurm."""
    if opts.torchrun:
        return launchers.Torchrun()
    if opts.hosts:
        return launchers.Hosts(opts.hosts, recipe.mpi.flavour)
    if opts.site is None:
        return launchers.Local()
    return launchers.Slurm(opts.site, recipe.mpi.flavour, out_dir / "slurm")


def gpu_driver(variant: str, launcher: launchers.Launcher) -> str | None:
    """The driver a cuda variant's trials run with (None: a CPU variant): this host's,
    which must show a GPU; under Slurm or on a host list, the GPU nodes' ("": not known
    from here, where a login node need have no GPU)."""
    if variant != "cuda":
        return None
    if launcher.elsewhere:
        return ""
    return gpu.require(variant)[0].driver


def prepare(
    rt: Runtime, image: "Recipe | Foreign", variant: str, driver: str | None = None
) -> Prepared:
    """What the runtime runs of the campaign's image (kit's recipe, or the user's own; with
    kit's benchmarks added to it, they run with the image's own Python), and with the
    host's GPUs passed in when its trials use them (driver: gpu_driver's answer)."""
    if not isinstance(image, Foreign):
        prep = rt.prepare(image, variant)
    else:
        prep = rt.prepare_foreign(image)
        prep = dataclasses.replace(prep, python=image.python) if image.python else prep
    return prep if driver is None else rt.with_gpus(prep, driver)


def preflight(
    recipe: Recipe,
    runtimes: list[Runtime],
    design: Design,
    opts: Options,
    out_dir: Path,
    launcher: launchers.Launcher | None = None,
    variant: str = "cpu",
) -> tuple[launchers.Launcher, str, str | None]:
    """Everything about the host that can be checked before the first trial (the dry run
    checks it too): the image has each benchmark, the launcher can start the ranks with
    this mpirun, each runtime is there, a cuda variant has a GPU. Returns the launcher,
    the mpirun to use and the GPU driver (gpu_driver)."""
    for c in design.configs:
        if c.bench not in recipe.benchmarks:
            raise KitError(
                f"image '{recipe.name}' has no benchmark '{c.bench}' "
                f"(has: {', '.join(recipe.benchmarks)})"
            )
    check_env(user_env())  # what every trial starts with: refused now, not at a trial
    launcher = launcher or launcher_for(opts, recipe, out_dir)
    mpirun = mpirun_for(recipe, opts.mpirun)
    launcher.check(recipe, [c.ranks for c in design.configs], mpirun)
    for rt in runtimes:
        rt.check()
    return launcher, mpirun, gpu_driver(variant, launcher)


def execute(
    recipe: Recipe,
    variant: str,
    runtimes: list[Runtime],
    design: Design,
    out_dir: Path,
    opts: Options,
    campaign: str,
    done: set[int],
    launcher: launchers.Launcher | None = None,
) -> str:
    """Run the design's rounds (skipping finished trials), recording each trial as it ends;
    returns why the campaign stopped. RunFailed (its records kept) when some arm has no
    trial that succeeded."""
    launcher, mpirun, driver = preflight(recipe, runtimes, design, opts, out_dir, launcher, variant)
    by_arm = {rt.arm: rt for rt in runtimes}
    prepared = {rt.arm: prepare(rt, recipe, variant, driver) for rt in runtimes}
    for rt in runtimes:
        launcher.check_prepared(rt, prepared[rt.arm])
    versions = {rt.arm: rt.version() for rt in runtimes}
    context = trial.Context(
        recipe,
        variant,
        opts,
        campaign,
        mpirun,
        launcher.mpi_version(mpirun),
        trial.host_info(),
        user_env(),
        launcher,
        out_dir,
    )
    records = [t for t in store.load(out_dir).records if t.campaign == campaign]
    fixed, per_round = design.warmups + design.repeats, design.per_round
    total = None  # trials left to run: known only for a fixed design
    if design.target is None:
        total = fixed * per_round - len(done)
        plan_text = f"{total} of {fixed * per_round} trials to run ({fixed} rounds)"
    else:
        plan_text = (
            f"{per_round} trials a round until every comparison is within "
            f"±{design.target.precision:.1%} or {units.minutes(design.target.budget_s)} are "
            f"spent (at least {fixed} rounds; {len(done)} trials already done)"
        )
    log.info(f"campaign {campaign}: {plan_text} -> {out_dir / store.FILE}")
    t_start, ran, r, own_s, length = time.monotonic(), 0, 0, 0.0, ""
    before_s = sum(t.wall_s or 0.0 for t in records)  # a resumed campaign's earlier trials
    # (a wall time that was no JSON number is filed as null: it counts as none)

    def spent() -> float:
        """The campaign's time so far: its wall time (never less than its trials' own)."""
        trials_s = sum(t.wall_s or 0.0 for t in records) - before_s
        return before_s + max(time.monotonic() - t_start, trials_s)

    try:  # registered however it ends: finished, stopped, interrupted or failed
        while (why := stop_reason(design, records, r, spent())) is None:
            eta = seconds_left(design, records, r, spent())  # the progress line's end
            if r == max(design.warmups, 1) and (short := short_budget(design, spent(), r)):
                log.info(f"campaign {campaign}: {short}")
            if r == design.warmups and context.opts.auto_min_time:
                opts, length = auto_min_time(context.opts, [t for t in records if t.warmup])
                context = dataclasses.replace(context, opts=opts)
                log.info(f"campaign {campaign}: {length}")
            for k, p in enumerate(design.round(r)):
                i = r * per_round + k
                if i in done:
                    continue
                why, left = next_trial(design, records, r, spent(), p.runtime)
                if why is not None:
                    break
                t_trial = time.monotonic()
                rt = by_arm[p.runtime]
                ctx = context  # its timeout capped by what is left of the budget
                if left is not None and left < context.opts.timeout:
                    ctx = dataclasses.replace(
                        context, opts=dataclasses.replace(context.opts, timeout=left)
                    )
                filed = trial.run(ctx, rt, prepared[p.runtime], versions[p.runtime], p, i)
                records.append(filed)
                own_s += time.monotonic() - t_trial - (filed.wall_s or 0.0)
                ran += 1
                progress.say(ran, total, filed, time.monotonic() - t_start, r, eta)
                if filed.status == "interrupted":
                    raise KeyboardInterrupt
            if why is not None:
                break
            r += 1
    finally:
        if ran:
            register(out_dir)
    summary = (why or f"{fixed} rounds done") + (f"; {length}" if length else "")
    if ran:
        log.info(
            f"campaign {campaign}: kit's own time per trial {1000 * own_s / ran:.0f} ms "
            "(set-up, clean-up and recording, beyond the launched command's wall time)"
        )
    log.info(f"campaign {campaign}: {summary}")
    if failed := unsuccessful(records):
        raise RunFailed(
            f"no trial of {'; '.join(failed)} succeeded; the records and their output are "
            f"in {out_dir / store.FILE} (kit report {out_dir})"
        )
    return summary
