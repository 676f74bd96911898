"""`kit run`'s loop: the design's rounds (kit.run.plan), each trial launched (kit.launch),
filed as a record the moment it ends (kit.results.store), until the stop rule says so.
Also each trial's argv, the reading of how it ended, and sbatch scripts for --emit.
"""

import dataclasses
import os
import platform
import shutil
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kit.core import benches, units
from kit.core.errors import KitError, RunFailed
from kit.image.recipes import Recipe
from kit.launch import hostload, launchers, process, slurm
from kit.results import store
from kit.results.record import SCHEMA as TRIAL_SCHEMA
from kit.results.record import Trial
from kit.run import progress
from kit.run.plan import Config, Design, Options, Planned, auto_min_time, stop_reason
from kit.runtimes import Job, Prepared, Runtime
from kit.runtimes.base import user_env

# What a rank or its launcher prints when memory ran out (Slurm's step daemon: the last one)
OOM_MARKERS = ("out of memory", "ran out of memory", "cannot allocate memory", "oom-kill event")


def program(
    prep_python: str, bench_dir: str, c: Config, opts: Options, data_dir: str, launch: str
) -> list[str]:
    """The benchmark's argv for one trial (data_dir: the data folder as the runtime sees it;
    launch: the start time, or the Slurm script's variable holding it)."""
    spec = benches.get(c.bench)
    argv = [prep_python, f"{bench_dir}/{spec.script}", *spec.fixed]
    if not spec.sweep:
        argv += ["--model", c.model, "--batch-size", str(c.batch_size)]
        argv += ["--steps", str(opts.steps), "--warmup", str(opts.warmup_steps)]
        if c.data == "real":
            argv += ["--data", "real", "--data-dir", data_dir]
    return [*argv, *opts.bench_args.get(c.bench, []), "--launch-time", launch]


def status(outcome: process.Outcome, lost: tuple[str, ...] = ()) -> str:
    """The trial's status; a run that did not fit in memory is a result (oom), whether the
    benchmark reported it, the process died saying so (TensorFlow aborts) or the kernel's
    OOM killer ended a rank (a container's memory limit, a full node); a trial whose
    runtime's service went away (its client says one of `lost`) is lost, and --resume
    runs it again."""
    if outcome.oom_killed or (outcome.result and outcome.result.get("status") == "oom"):
        return "oom"
    text = outcome.output_tail.lower()
    if outcome.status == "failed" and any(m in text for m in OOM_MARKERS):
        return "oom"
    if outcome.status == "failed" and any(m.lower() in text for m in lost):
        return "lost"
    return outcome.status


def unsuccessful(records: list[dict]) -> list[str]:
    """Arms none of whose measured trials succeeded, each with how its trials ended, e.g.
    'docker (3 failed, 1 timeout)'; running out of memory is a result, not a failure."""
    ends: dict[str, Counter] = {}
    for r in records:
        if not r["warmup"]:
            ends.setdefault(r["runtime"], Counter())[r["status"]] += 1
    return [
        f"{arm} ({', '.join(f'{n} {status}' for status, n in sorted(c.items()))})"
        for arm, c in ends.items()
        if not c["ok"] and not c["oom"]
    ]


def host_info() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "machine": platform.machine(),
    }


def mpirun_for(recipe: Recipe, override: str | None) -> str:
    """The host launcher: --mpirun, else the recipe flavour's own (mpirun.mpich), else mpirun."""
    if override:
        return override
    for name in (recipe.mpi.spec.mpirun, "mpirun"):
        if shutil.which(name):
            return name
    return recipe.mpi.spec.mpirun


def launcher_for(opts: "Options", recipe: Recipe, out_dir: Path) -> launchers.Launcher:
    """Local by default; under --launcher slurm one batch job a trial, scripts in OUT/slurm."""
    if opts.site is None:
        return launchers.Local()
    return launchers.Slurm(opts.site, recipe.mpi.flavour, out_dir / "slurm")


def preflight(
    recipe: Recipe,
    runtimes: list[Runtime],
    design: Design,
    opts: Options,
    out_dir: Path,
    launcher: launchers.Launcher | None = None,
) -> tuple[launchers.Launcher, str]:
    """Everything about the host that can be checked before the first trial (the dry run
    checks it too): the image has each benchmark, the launcher can start the ranks with
    this mpirun, each runtime is there. Returns the launcher and the mpirun to use."""
    for c in design.configs:
        if c.bench not in recipe.benchmarks:
            raise KitError(
                f"image '{recipe.name}' has no benchmark '{c.bench}' "
                f"(has: {', '.join(recipe.benchmarks)})"
            )
    launcher = launcher or launcher_for(opts, recipe, out_dir)
    mpirun = mpirun_for(recipe, opts.mpirun)
    launcher.check(recipe, [c.ranks for c in design.configs], mpirun)
    for rt in runtimes:
        rt.check()
    return launcher, mpirun


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
    launcher, mpirun = preflight(recipe, runtimes, design, opts, out_dir, launcher)
    by_arm = {rt.arm: rt for rt in runtimes}
    prepared = {rt.arm: rt.prepare(recipe, variant) for rt in runtimes}
    versions = {rt.arm: rt.version() for rt in runtimes}
    context = Context(
        recipe,
        variant,
        opts,
        campaign,
        mpirun,
        launcher.mpi_version(mpirun),
        host_info(),
        user_env(),
        launcher,
        out_dir,
    )
    records = [r for r in store.load(out_dir).records if r["campaign"] == campaign]
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
    print(f"campaign {campaign}: {plan_text} -> {out_dir / store.FILE}", file=sys.stderr)
    t_start, ran, r, own_s, length = time.monotonic(), 0, 0, 0.0, ""
    while (why := stop_reason(design, records, r)) is None:
        if r == design.warmups and context.opts.auto_min_time:
            opts, length = auto_min_time(context.opts, [x for x in records if x["warmup"]])
            context = dataclasses.replace(context, opts=opts)
            print(f"campaign {campaign}: {length}", file=sys.stderr)
        for k, p in enumerate(design.round(r)):
            i = r * per_round + k
            if i in done:
                continue
            t_trial = time.monotonic()
            rt = by_arm[p.runtime]
            record = _one_trial(context, rt, prepared[p.runtime], versions[p.runtime], p, i)
            records.append(record)
            own_s += time.monotonic() - t_trial - record["wall_s"]
            ran += 1
            progress.say(ran, total, record, time.monotonic() - t_start, r)
            if record["status"] == "interrupted":
                raise KeyboardInterrupt
        r += 1
    summary = (why or f"{fixed} rounds done") + (f"; {length}" if length else "")
    if ran:
        print(
            f"campaign {campaign}: kit's own time per trial {1000 * own_s / ran:.0f} ms "
            "(set-up, clean-up and recording, beyond the launched command's wall time)",
            file=sys.stderr,
        )
    print(f"campaign {campaign}: {summary}", file=sys.stderr)
    if failed := unsuccessful(records):
        raise RunFailed(
            f"no trial of {'; '.join(failed)} succeeded; the records and their output are "
            f"in {out_dir / store.FILE} (kit report {out_dir})"
        )
    return summary


@dataclass(frozen=True)
class Context:
    """What every trial of one campaign shares."""

    recipe: Recipe
    variant: str
    opts: Options
    campaign: str
    mpirun: str
    mpirun_version: str
    host: dict
    env: dict[str, str]
    launcher: launchers.Launcher
    out_dir: Path


def title(recipe: Recipe, rt: Runtime, job: Job, c: Config) -> str:
    what = c.bench
    if not benches.is_sweep(c.bench):
        what = f"{c.bench} {c.model} bs={c.batch_size} {c.data}"
    return (
        f"kit trial {job.name}: {rt.arm}, {recipe.name} {recipe.version}, {what}, {c.ranks} rank(s)"
    )


def _one_trial(ctx: Context, rt: Runtime, prep: Prepared, version: str, p: Planned, i: int) -> dict:
    """Run one trial and file its record the moment it ends."""
    c, opts = p.config, ctx.opts
    name = f"kit-{ctx.campaign}-{i}"
    started = datetime.now(UTC).isoformat(timespec="seconds")
    before = hostload.sample()
    job = trial_job(rt, prep, c, opts, ctx.mpirun, name, ctx.launcher.launch_time(time.time()))
    env = {**ctx.env, **rt.client_settings(), **rt.env, **dict(prep.env)}
    launched = ctx.launcher.run(rt, prep, job, env, opts.timeout, title(ctx.recipe, rt, job, c))
    outcome = launched.outcome
    own = ctx.launcher.owns_ranks(rt)
    host_load = hostload.during(before, hostload.sample(), outcome.wall_s, own=own)
    ended = status(outcome, rt.service_lost)
    why = f"{rt.service} stopped answering" if ended == "lost" else outcome.cause
    filed = Trial(
        schema=TRIAL_SCHEMA,
        campaign=ctx.campaign,
        index=i,
        warmup=p.warmup,
        repeat=p.repeat,
        image=ctx.recipe.name,
        variant=ctx.variant,
        bench=c.bench,
        model=c.model,
        batch_size=c.batch_size,
        ranks=c.ranks,
        data=c.data,
        bench_args=opts.bench_args.get(c.bench, []),
        steps=opts.steps,
        warmup_steps=opts.warmup_steps,
        launcher=ctx.launcher.label(rt, c.ranks),
        runtime=rt.arm,
        runtime_kind=rt.name,
        runtime_version=version,
        runtime_settings=[*rt.settings, *prep.settings],
        runtime_args=job.extra,
        recipe_version=ctx.recipe.version,
        image_digest=prep.digest,
        image_ref=prep.ref,
        mpirun=ctx.mpirun_version if c.ranks > 1 else None,
        slurm=launched.job_info,
        argv=launched.argv,
        host=ctx.host,
        host_load=host_load,
        started=started,
        wall_s=round(outcome.wall_s, 4),
        status=ended,
        cause=why,
        exit_code=outcome.exit_code,
        result=outcome.result,
        output_tail=outcome.output_tail if ended != "ok" else "",
        stuck=list(outcome.stuck),
    ).to_json()
    store.append(ctx.out_dir, filed)
    return filed


def trial_job(
    rt: Runtime, prep: Prepared, c: Config, opts: Options, mpirun: str, name: str, launch: str
) -> Job:
    """The launch of one trial: its program (with the data folder as the runtime sees it)."""
    real = c.data == "real" and opts.data_dir
    data = rt.data_path(opts.data_dir) if real else ""
    argv = program(prep.python, prep.bench_dir, c, opts, data, launch)
    binds = (opts.data_dir,) if real else ()
    return Job(argv, c.ranks, mpirun, name, opts.runtime_args.get(rt.arm, []), binds)


def emit(
    recipe: Recipe,
    variant: str,
    runtimes: list[Runtime],
    trials: list[Planned],
    folder: Path,
    opts: Options,
) -> list[Path]:
    """Write every trial's sbatch script to folder, in plan order, without submitting."""
    mpirun = mpirun_for(recipe, opts.mpirun)
    writer = launchers.Slurm(opts.site, recipe.mpi.flavour, folder)
    by_arm = {rt.arm: rt for rt in runtimes}
    prepared = {rt.arm: rt.prepare(recipe, variant) for rt in runtimes}
    paths_out = []
    for i, p in enumerate(trials):
        rt, prep = by_arm[p.runtime], prepared[p.runtime]
        job = trial_job(rt, prep, p.config, opts, mpirun, f"kit-{i:04d}", slurm.LAUNCH_ARG)
        path, _ = writer.write(rt, prep, job, title(recipe, rt, job, p.config))
        paths_out.append(path)
    return paths_out
