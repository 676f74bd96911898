"""`kit run`: plan trials over runtimes x configurations, run them interleaved, record each.

Rounds interleave runtimes in a seeded random order, so slow drift on the host
(thermal, page cache, a neighbour's job) falls on every runtime alike, and the
first round(s) are warm-up trials, recorded but flagged and left out of reports.
The campaign's settings are saved beside its results, so `--resume` can run
exactly the trials that have not finished.
"""

import dataclasses
import json
import math
import os
import platform
import random
import shutil
import socket
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kit.core import benches, units
from kit.core.errors import KitError
from kit.image.recipes import Recipe
from kit.launch import hostload, launchers, process, slurm
from kit.results import analysis, stats, store
from kit.results.record import SCHEMA as TRIAL_SCHEMA
from kit.results.record import Trial
from kit.runtimes import Job, Prepared, Runtime
from kit.runtimes.base import user_env

SPEC_FILE = store.SPEC_FILE
FINISHED = ("ok", "failed", "oom")  # a timeout or an interrupted trial runs again on --resume
OOM_MARKERS = ("out of memory", "ran out of memory", "cannot allocate memory")


@dataclass(frozen=True)
class Config:
    bench: str
    model: str
    batch_size: int
    ranks: int
    data: str = "synthetic"


def configs(
    names: list[str], models: list[str], batch_sizes: list[int], ranks: list[int], data: list[str]
) -> list[Config]:
    """The product of the campaign's dimensions; a sweep benchmark takes ranks only."""
    out = []
    for b in names:
        if benches.is_sweep(b):
            out += [Config(b, "-", 0, n) for n in ranks]
        else:
            out += [
                Config(b, m, bs, n, d)
                for m in models
                for bs in batch_sizes
                for n in ranks
                for d in data
            ]
    return out


@dataclass(frozen=True)
class Planned:
    runtime: str
    config: Config
    repeat: int  # -1 .. -W for warm-up rounds
    warmup: bool


@dataclass(frozen=True)
class Options:
    steps: int = 100
    warmup_steps: int = 5
    timeout: float = 600.0
    mpirun: str | None = None
    runtime_args: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    bench_args: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # by bench
    data_dir: str | None = None  # host folder of the real-data set, bound into containers
    site: slurm.Site | None = None  # None: launch locally (mpirun); else one Slurm job a trial
    auto_min_time: bool = False  # --min-time auto: chosen from the warm-up round


def auto_min_time(opts: Options, warmups: list[dict]) -> tuple[Options, str]:
    """opts with the training benchmarks' --min-time chosen from the warm-up trials
    (stats.trial_seconds), and a line saying what was chosen and from what. Derived from
    the records alone, so --resume chooses the same."""
    ok = [r for r in warmups if r["status"] == "ok" and r["result"].get("step_times_s")]
    if not ok:
        return dataclasses.replace(opts, auto_min_time=False), (
            "--min-time auto: no warm-up trial finished; trials time --steps steps only"
        )
    steps = [r["result"]["step_times_s"] for r in ok]
    step_s = statistics.median(x for s in steps for x in s)
    cv = statistics.median(
        statistics.pstdev(s) / statistics.fmean(s) if len(s) > 1 else 0.0 for s in steps
    )
    fixed = statistics.median(r["wall_s"] - sum(s) for r, s in zip(ok, steps, strict=True))
    chosen = max(0.5, round(2 * stats.trial_seconds(fixed, step_s, cv, stats.LAUNCH_SD)) / 2)
    args = {
        b: a if benches.is_sweep(b) else [*a, "--min-time", f"{chosen:g}"]
        for b, a in opts.bench_args.items()
    }
    return dataclasses.replace(opts, bench_args=args, auto_min_time=False), (
        f"--min-time auto: {chosen:g} s (a launch's fixed cost {fixed:.1f} s, steps "
        f"{step_s:.2f} s ±{cv:.0%}, launch spread {stats.LAUNCH_SD:.0%} assumed)"
    )


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


def status(outcome: process.Outcome) -> str:
    """The trial's status; a run that did not fit in memory is a result (oom), whether the
    benchmark reported it or the process died saying so (TensorFlow aborts)."""
    if outcome.result and outcome.result.get("status") == "oom":
        return "oom"
    text = outcome.output_tail.lower()
    if outcome.status == "failed" and any(m in text for m in OOM_MARKERS):
        return "oom"
    return outcome.status


BASELINE = "native"  # the arm every other is compared with, launched more often


def baseline_launches(runtimes: list[str]) -> int:
    """Launches of the baseline a round, about sqrt(k) for k arms compared with it.

    All k comparisons share the baseline's noise: with b of its launches a round, a
    per-round log ratio has variance (1 + 1/b) s^2 and a round costs k + b launches, so
    the interval width a minute goes as sqrt((1 + 1/b)(k + b)), least near b = sqrt(k)
    (k = 4: b = 2 is 5 % narrower a minute than b = 1)."""
    k = len(runtimes) - 1
    return max(1, round(math.sqrt(k))) if BASELINE in runtimes and k >= 2 else 1


def plan_round(
    runtimes: list[str], configs: list[Config], r: int, warmups: int, seed: int, launches: int = 1
):
    """Round r: every runtime arm x configuration once (the baseline `launches` times), in
    an order seeded by (seed, r)."""
    round_ = [
        (rt, c)
        for c in configs
        for rt in runtimes
        for _ in range(launches if rt == BASELINE else 1)
    ]
    random.Random(f"{seed}:{r}").shuffle(round_)
    return [Planned(rt, c, r - warmups, r < warmups) for rt, c in round_]


def plan(
    runtimes: list[str],
    configs: list[Config],
    repeats: int,
    warmups: int,
    seed: int,
    launches: int = 1,
) -> list[Planned]:
    """A fixed design: warm-up rounds, then `repeats` measured rounds."""
    return [
        p
        for r in range(warmups + repeats)
        for p in plan_round(runtimes, configs, r, warmups, seed, launches)
    ]


@dataclass(frozen=True)
class Target:
    """A precision-targeted campaign: rounds are added until every comparison's interval
    (family-adjusted, at `confidence`) is within ±precision, or the budget is spent."""

    precision: float  # relative half-width, e.g. 0.02
    budget_s: float
    confidence: float = 0.95


@dataclass(frozen=True)
class Design:
    runtimes: list[str]
    configs: list[Config]
    repeats: int  # measured rounds; with a Target, the fewest before the first check
    warmups: int
    seed: int
    target: Target | None = None
    baseline_launches: int = 1  # launches of BASELINE a round

    def round(self, r: int) -> list[Planned]:
        return plan_round(
            self.runtimes, self.configs, r, self.warmups, self.seed, self.baseline_launches
        )

    @property
    def per_round(self) -> int:
        extra = self.baseline_launches - 1 if BASELINE in self.runtimes else 0
        return (len(self.runtimes) + extra) * len(self.configs)


def stop_reason(design: Design, records: list[dict], rounds_done: int) -> str | None:
    """Why a precision-targeted campaign stops after this round, or None to go on. Looks
    only at the intervals' widths (stats.precise), never at their verdicts."""
    t = design.target
    if rounds_done < design.warmups + design.repeats:
        return None
    if t is None:
        return ""
    a = analysis.summarise(records, "", t.confidence)
    ratios = [arm.ratio for g in a.groups for arm in g.arms if arm.ratio is not None]
    widths = ", ".join(
        f"{arm.runtime} ±{arm.half_width:.1%}" for g in a.groups for arm in g.arms if arm.ratio
    )
    if ratios and stats.precise(ratios, t.precision):
        return f"precision ±{t.precision:.1%} reached after {rounds_done} rounds ({widths})"
    spent = sum(r["wall_s"] for r in records)
    per_round = spent / max(rounds_done, 1)
    if spent + per_round > t.budget_s:
        return (
            f"budget {units.minutes(t.budget_s)} spent after {rounds_done} rounds, precision "
            f"±{t.precision:.1%} not reached ({widths or 'no comparison yet'})"
        )
    return None


def start(out_dir: Path, spec: dict, resume: bool) -> tuple[str, set[int]]:
    """The campaign id, and the plan indices already finished (with --resume)."""
    spec = json.loads(json.dumps(spec))
    path = out_dir / SPEC_FILE
    store.writable(out_dir)
    if not resume:
        if (out_dir / store.FILE).stat().st_size:
            raise KitError(
                f"{out_dir} already holds trials; pass --resume to continue that campaign "
                "or choose another --out"
            )
        campaign = uuid.uuid4().hex[:8]
        out_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"campaign": campaign, **spec}, indent=2) + "\n")
        return campaign, set()
    if not path.is_file():
        raise KitError(f"nothing to resume in {out_dir} (no {SPEC_FILE}); drop --resume")
    saved = _saved_spec(path)
    campaign = saved.pop("campaign")
    changed = sorted(k for k in spec.keys() | saved.keys() if spec.get(k) != saved.get(k))
    if changed:
        raise KitError(
            f"--resume must repeat the campaign's options; these differ from {path}: "
            + ", ".join(changed)
        )
    done = {
        r["index"]
        for r in store.load(out_dir).records
        if r["campaign"] == campaign and r["status"] in FINISHED
    }
    return campaign, done


def _saved_spec(path: Path) -> dict:
    """The settings a campaign saved, or a KitError naming what is wrong with the file."""
    try:
        saved = json.loads(path.read_bytes())
    except (OSError, ValueError) as e:
        raise KitError(
            f"{path} cannot be read as a campaign ({e.__class__.__name__}); "
            "start a new campaign with another --out"
        ) from None
    if not isinstance(saved, dict) or not isinstance(saved.get("campaign"), str):
        raise KitError(f"{path} holds no campaign id; start a new campaign with another --out")
    return saved


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
    returns why the campaign stopped."""
    for c in design.configs:
        if c.bench not in recipe.benchmarks:
            raise KitError(
                f"image '{recipe.name}' has no benchmark '{c.bench}' "
                f"(has: {', '.join(recipe.benchmarks)})"
            )
    launcher = launcher or launcher_for(opts, recipe, out_dir)
    mpirun = mpirun_for(recipe, opts.mpirun)
    launcher.check(recipe, [c.ranks for c in design.configs], mpirun)
    by_arm = {rt.arm: rt for rt in runtimes}
    for rt in runtimes:
        rt.check()
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
    fixed = design.warmups + design.repeats
    total = None  # trials left to run: known only for a fixed design
    if design.target is None:
        total = fixed * design.per_round - len(done)
        plan_text = f"{total} of {fixed * design.per_round} trials to run ({fixed} rounds)"
    else:
        plan_text = (
            f"{design.per_round} trials a round until every comparison is within "
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
            i = r * design.per_round + k
            if i in done:
                continue
            t_trial = time.monotonic()
            rt = by_arm[p.runtime]
            record = _one_trial(context, rt, prepared[p.runtime], versions[p.runtime], p, i)
            records.append(record)
            own_s += time.monotonic() - t_trial - record["wall_s"]
            ran += 1
            _progress(ran, total, record, time.monotonic() - t_start, r)
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
    env = {**ctx.env, **rt.env, **dict(prep.env)}
    launched = ctx.launcher.run(rt, prep, job, env, opts.timeout, title(ctx.recipe, rt, job, c))
    outcome = launched.outcome
    own = ctx.launcher.owns_ranks(rt)
    host_load = hostload.during(before, hostload.sample(), outcome.wall_s, own=own)
    ended = status(outcome)
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


def _figure(record: dict) -> str:
    r = record["result"]
    if record["status"] != "ok" or not r:
        return record["status"].upper()
    if benches.is_sweep(record["bench"]):
        first = (r.get("allreduce") or r["p2p"])[0]
        what = "allreduce" if r.get("allreduce") else "p2p"
        return f"{what} {first['latency_us']:.1f} us at {first['bytes']} B"
    m = benches.metric(record["bench"])
    return f"{r[m.key]:.1f} {m.unit}"


def _progress(done: int, total: int | None, record: dict, elapsed: float, r: int) -> None:
    tag = " (warm-up)" if record["warmup"] else ""
    what = (
        record["bench"]
        if benches.is_sweep(record["bench"])
        else (f"{record['model']} bs={record['batch_size']} {record['data']}")
    )
    if total:
        eta = elapsed / done * (total - done)
        filled = round(20 * done / total)
        head = f"[{'#' * filled}{'.' * (20 - filled)}] {done}/{total}"
        tail = f"; ETA {eta // 60:.0f} min {eta % 60:02.0f} s"
    else:
        head, tail = f"round {r} trial {done}", f"; {elapsed // 60:.0f} min {elapsed % 60:02.0f} s"
    print(
        f"{head} {record['runtime']:<12} np={record['ranks']} {what}: {_figure(record)}{tag} "
        f"in {record['wall_s']:.1f} s{tail}",
        file=sys.stderr,
        flush=True,
    )
