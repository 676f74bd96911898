"""One trial: its job (the benchmark's argv, the data folder it binds), the launch, how
it ended (ok, failed, oom, lost, ...) and its record, filed the moment it ends."""

import os
import platform
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kit.core import benches
from kit.image import verify
from kit.image.recipes import Recipe
from kit.launch import hostload, launchers, outcomes
from kit.results import store
from kit.results.record import SCHEMA as TRIAL_SCHEMA
from kit.results.record import Trial
from kit.run.plan import Config, Options, Planned
from kit.runtimes import Job, Prepared, Runtime

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


def status(outcome: outcomes.Outcome, lost: tuple[str, ...] = ()) -> str:
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
    if not benches.is_sweep(c.bench) and c.model != "-":
        what = f"{c.bench} {c.model} bs={c.batch_size} {c.data}"
    head = f"kit trial {job.name}: {rt.arm}, {recipe.label} {recipe.version}"
    return f"{head}, {what}, {c.ranks} rank(s)"


def run(ctx: Context, rt: Runtime, prep: Prepared, version: str, p: Planned, i: int) -> Trial:
    """Run one trial and file its record the moment it ends; the trial as filed (the store
    files a figure that is no JSON number as null)."""
    c, opts = p.config, ctx.opts
    name = f"kit-{ctx.campaign}-{i}"
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load1 = hostload.loadavg()
    job = trial_job(rt, prep, c, opts, ctx.mpirun, name, ctx.launcher.launch_time(time.time()))
    env = {**ctx.env, **rt.client_settings(), **rt.env, **dict(prep.env)}
    launched = ctx.launcher.run(rt, prep, job, env, opts.timeout, title(ctx.recipe, rt, job, c))
    outcome = launched.outcome
    # ranks on other hosts: this host's load is no evidence about theirs (hostload.during)
    host_load = hostload.during(load1, outcome.window, ranks_here=not ctx.launcher.elsewhere)
    ended = status(outcome, rt.service_lost)
    result = outcome.result
    if job.watch_mpi and result is not None:  # what its ranks really loaded
        result = {**result, "mpi_loaded": list(outcome.mpi_loaded)}
    if outcome.fingerprint is not None and result is not None:  # as kit's benchmarks' own
        result = {**result, "fingerprint": outcome.fingerprint}
    why = f"{rt.service} stopped answering" if ended == "lost" else outcome.cause
    log = store.save_log(ctx.out_dir, name, outcome.output) if outcome.output else ""
    filed = Trial(
        schema=TRIAL_SCHEMA,
        campaign=ctx.campaign,
        index=i,
        warmup=p.warmup,
        repeat=p.repeat,
        image=ctx.recipe.label,
        variant=ctx.variant,
        bench=c.bench,
        model=c.model,
        batch_size=c.batch_size,
        ranks=c.ranks,
        data=c.data,
        bench_args=opts.bench_args.get(c.bench, []),
        steps=0 if opts.command else opts.steps,  # a command's own length is its own
        warmup_steps=0 if opts.command else opts.warmup_steps,
        launcher=ctx.launcher.label(rt, c.ranks),
        host_list=list(opts.hosts),
        runtime=rt.arm,
        runtime_kind=rt.name,
        runtime_version=version,
        runtime_settings=[*rt.settings, *prep.settings],
        runtime_args=job.extra,
        recipe_version=ctx.recipe.version,
        stack=ctx.recipe.stack,
        image_digest=prep.digest,
        image_ref=prep.ref,
        image_verified=verify.filed(ctx.recipe.name, prep.digest),
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
        result=result,
        output_tail=outcome.output_tail if ended != "ok" else "",
        log=log,
        stuck=list(outcome.stuck),
    )
    return Trial.from_json(store.append(ctx.out_dir, filed.to_json()))


def trial_job(
    rt: Runtime, prep: Prepared, c: Config, opts: Options, mpirun: str, name: str, launch: str
) -> Job:
    """The launch of one trial: its program (with the data folder as the runtime sees it)."""
    extra = opts.runtime_args.get(rt.arm, [])
    if cmd := opts.command:  # a user's command: theirs natively, the image's otherwise
        argv = cmd.native_argv if rt.runs == "host" else cmd.argv
        return Job(
            list(argv), c.ranks, mpirun, name, extra,
            read=cmd.reader, watch_mpi=c.ranks > 1, fingerprint=True,
        )  # fmt: skip
    real = c.data == "real" and opts.data_dir
    data = rt.data_path(opts.data_dir) if real else ""
    argv = program(prep.python, prep.bench_dir, c, opts, data, launch)
    binds = (opts.data_dir,) if real else ()
    return Job(argv, c.ranks, mpirun, name, extra, binds)
