"""`kit run`: plan trials over runtimes x configurations, run them interleaved, record each.

Rounds interleave runtimes in a seeded random order, so slow drift on the host
(thermal, page cache, a neighbour's job) falls on every runtime alike, and the
first round(s) are warm-up trials, recorded but flagged and left out of reports.
The campaign's settings are saved beside its results, so `--resume` can run
exactly the trials that have not finished.
"""

import dataclasses
import importlib.util
import json
import os
import platform
import random
import shutil
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from . import paths, results, slurm, trial
from .errors import KitError
from .recipes import Recipe
from .runtimes import Job, Runtime
from .runtimes.base import first_line, user_env

# benchmark name -> (script in benchmarks/, fixed arguments)
BENCHES = {
    "torch-cnn": ("torch_cnn.py", []),
    "torch-hvd": ("torch_cnn.py", ["--dist", "horovod"]),
    "tf-cnn": ("tf_cnn.py", []),
    "caffe2-cnn": ("caffe2_cnn.py", []),
    "mpi": ("mpi_bench.py", []),
}
SWEEPS = ("mpi",)  # benchmarks without model, batch size or data: one sweep per trial
SPEC_FILE = "campaign.json"
FINISHED = ("ok", "failed", "oom")  # a timeout or an interrupted trial runs again on --resume
OOM_MARKERS = ("out of memory", "ran out of memory", "cannot allocate memory")


@dataclass(frozen=True)
class Config:
    bench: str
    model: str
    batch_size: int
    ranks: int
    data: str = "synthetic"


def models_of(bench: str) -> list[str]:
    """The models a benchmark accepts, read from its own MODELS (the modules import only
    the standard library at load time), so the plan is checked before anything runs."""
    script = paths.repo_root() / "benchmarks" / BENCHES[bench][0]
    spec = importlib.util.spec_from_file_location(f"kit_bench_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(script.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(script.parent))
    return list(getattr(module, "MODELS", {}))


def configs(
    benches: list[str], models: list[str], batch_sizes: list[int], ranks: list[int], data: list[str]
) -> list[Config]:
    """The product of the campaign's dimensions; a sweep benchmark takes ranks only."""
    out = []
    for b in benches:
        if b in SWEEPS:
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
    bench_args: list[str] = dataclasses.field(default_factory=list)
    data_dir: str | None = None  # host folder of the real-data set, bound into containers
    site: slurm.Site | None = None  # None: launch locally (mpirun); else one Slurm job a trial


def program(
    prep_python: str, bench_dir: str, c: Config, opts: Options, data_dir: str, launch: str
) -> list[str]:
    """The benchmark's argv for one trial (data_dir: the data folder as the runtime sees it;
    launch: the start time, or the Slurm script's variable holding it)."""
    script, fixed = BENCHES[c.bench]
    argv = [prep_python, f"{bench_dir}/{script}", *fixed]
    if c.bench not in SWEEPS:
        argv += ["--model", c.model, "--batch-size", str(c.batch_size)]
        argv += ["--steps", str(opts.steps), "--warmup", str(opts.warmup_steps)]
        if c.data == "real":
            argv += ["--data", "real", "--data-dir", data_dir]
    return [*argv, *opts.bench_args, "--launch-time", launch]


def status(outcome: trial.Outcome) -> str:
    """The trial's status; a run that did not fit in memory is a result (oom), whether the
    benchmark reported it or the process died saying so (TensorFlow aborts)."""
    if outcome.result and outcome.result.get("status") == "oom":
        return "oom"
    text = outcome.output_tail.lower()
    if outcome.status == "failed" and any(m in text for m in OOM_MARKERS):
        return "oom"
    return outcome.status


def plan(
    runtimes: list[str], configs: list[Config], repeats: int, warmups: int, seed: int
) -> list[Planned]:
    rng = random.Random(seed)
    out = []
    for r in range(warmups + repeats):
        round_ = [(rt, c) for c in configs for rt in runtimes]
        rng.shuffle(round_)
        out += [Planned(rt, c, r - warmups, r < warmups) for rt, c in round_]
    return out


def start(out_dir: Path, spec: dict, resume: bool) -> tuple[str, set[int]]:
    """The campaign id, and the plan indices already finished (with --resume)."""
    spec = json.loads(json.dumps(spec))
    path = out_dir / SPEC_FILE
    if not resume:
        if (out_dir / results.FILE).exists():
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
    saved = json.loads(path.read_text())
    campaign = saved.pop("campaign")
    changed = sorted(k for k in spec.keys() | saved.keys() if spec.get(k) != saved.get(k))
    if changed:
        raise KitError(
            f"--resume must repeat the campaign's options; these differ from {path}: "
            + ", ".join(changed)
        )
    done = {
        r["index"]
        for r in results.load(out_dir)
        if r.get("campaign") == campaign and r.get("status") in FINISHED
    }
    return campaign, done


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


def execute(
    recipe: Recipe,
    variant: str,
    runtimes: list[Runtime],
    trials: list[Planned],
    out_dir: Path,
    opts: Options,
    campaign: str,
    done: set[int],
) -> None:
    for p in trials:
        if p.config.bench not in recipe.benchmarks:
            raise KitError(
                f"image '{recipe.name}' has no benchmark '{p.config.bench}' "
                f"(has: {', '.join(recipe.benchmarks)})"
            )
    mpirun = mpirun_for(recipe, opts.mpirun)
    local = opts.site is None
    if not local and shutil.which("sbatch") is None:
        raise KitError(
            "--launcher slurm needs 'sbatch' on PATH (a Slurm client); or use --emit DIR"
        )
    if local and any(p.config.ranks > 1 for p in trials) and shutil.which(mpirun) is None:
        raise KitError(
            f"more than one rank needs '{mpirun}' on PATH; install "
            f"{recipe.mpi.spec.packages[0]} or pass --mpirun PATH"
        )
    by_arm = {rt.arm: rt for rt in runtimes}
    for rt in runtimes:
        rt.check()
    prepared = {rt.arm: rt.prepare(recipe, variant) for rt in runtimes}
    versions = {rt.arm: rt.version() for rt in runtimes}
    mpirun_version = first_line([mpirun, "--version"]) if shutil.which(mpirun) else "none"
    host = host_info()
    env = user_env()
    todo = [(i, p) for i, p in enumerate(trials) if i not in done]
    print(
        f"campaign {campaign}: {len(todo)} of {len(trials)} trials to run "
        f"-> {out_dir / results.FILE}",
        file=sys.stderr,
    )
    t_start = time.monotonic()
    for n, (i, p) in enumerate(todo):
        rt, prep, c = by_arm[p.runtime], prepared[p.runtime], p.config
        name = f"kit-{campaign}-{i}"
        started = datetime.now(UTC).isoformat(timespec="seconds")
        job_info = None
        if local:
            job = trial_job(rt, prep, c, opts, mpirun, name, f"{time.time():.6f}")
            argv = rt.command(prep, job)
            outcome = trial.run(
                argv, {**env, **rt.env}, opts.timeout, name, lambda rt=rt, job=job: rt.cleanup(job)
            )
        else:
            job = trial_job(rt, prep, c, opts, mpirun, name, slurm.LAUNCH_ARG)
            path, output = write_script(rt, prep, job, c, recipe, opts.site, out_dir / "slurm")
            argv = ["sbatch", str(path)]
            outcome, job_info = slurm.submit(path, output, {**env, **rt.env}, opts.timeout, name)
        ended = status(outcome)
        record = {
            "schema": results.SCHEMA,
            "campaign": campaign,
            "index": i,
            "warmup": p.warmup,
            "repeat": p.repeat,
            "runtime": rt.arm,
            "runtime_kind": rt.name,
            "runtime_version": versions[rt.arm],
            "runtime_settings": list(rt.settings),
            "runtime_args": job.extra,
            "launcher": rt.launcher(c.ranks) if local else "slurm",
            "slurm": job_info,
            "mpirun": mpirun_version if c.ranks > 1 else None,
            "ranks": c.ranks,
            "bench": c.bench,
            "model": c.model,
            "batch_size": c.batch_size,
            "data": c.data,
            "bench_args": opts.bench_args,
            "image": recipe.name,
            "recipe_version": recipe.version,
            "variant": variant,
            "image_digest": prep.digest,
            "image_ref": prep.ref,
            "argv": argv,
            "host": host,
            "started": started,
            "wall_s": round(outcome.wall_s, 4),
            "status": ended,
            "exit_code": outcome.exit_code,
            "result": outcome.result,
            "output_tail": outcome.output_tail if ended != "ok" else "",
        }
        results.append(out_dir, record)
        _progress(n + 1, len(todo), record, time.monotonic() - t_start)
        if outcome.status == "interrupted":
            raise KeyboardInterrupt


def trial_job(
    rt: Runtime, prep, c: Config, opts: Options, mpirun: str, name: str, launch: str
) -> Job:
    """The launch of one trial: its program (with the data folder as the runtime sees it)."""
    real = c.data == "real" and opts.data_dir
    data = rt.data_path(opts.data_dir) if real else ""
    argv = program(prep.python, prep.bench_dir, c, opts, data, launch)
    binds = (opts.data_dir,) if real else ()
    return Job(argv, c.ranks, mpirun, name, opts.runtime_args.get(rt.arm, []), binds)


def write_script(
    rt: Runtime, prep, job: Job, c: Config, recipe: Recipe, site: slurm.Site, folder: Path
) -> tuple[Path, Path]:
    """One trial's sbatch script in folder; its path and its job's output file."""
    folder.mkdir(parents=True, exist_ok=True)
    path, output = folder / f"{job.name}.sbatch", (folder / f"{job.name}.out").resolve()
    what = c.bench if c.bench in SWEEPS else f"{c.bench} {c.model} bs={c.batch_size} {c.data}"
    title = (
        f"kit trial {job.name}: {rt.arm}, {recipe.name} {recipe.version}, {what}, {c.ranks} rank(s)"
    )
    text = slurm.script(rt, prep, job, site, recipe.mpi.flavour, output, title)
    path.write_text(text)
    return path, output


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
    by_arm = {rt.arm: rt for rt in runtimes}
    prepared = {rt.arm: rt.prepare(recipe, variant) for rt in runtimes}
    paths_out = []
    for i, p in enumerate(trials):
        rt = by_arm[p.runtime]
        job = trial_job(
            rt, prepared[rt.arm], p.config, opts, mpirun, f"kit-{i:04d}", slurm.LAUNCH_ARG
        )
        path, _ = write_script(rt, prepared[rt.arm], job, p.config, recipe, opts.site, folder)
        paths_out.append(path)
    return paths_out


def _figure(record: dict) -> str:
    r = record["result"]
    if record["status"] != "ok" or not r:
        return record["status"].upper()
    if record["bench"] in SWEEPS:
        return (
            f"allreduce {r['allreduce'][0]['latency_us']:.1f} us at {r['allreduce'][0]['bytes']} B"
        )
    return f"{r['images_per_sec']:.1f} images/s"


def _progress(done: int, total: int, record: dict, elapsed: float) -> None:
    eta = elapsed / done * (total - done)
    tag = " (warm-up)" if record["warmup"] else ""
    what = (
        record["bench"]
        if record["bench"] in SWEEPS
        else (f"{record['model']} bs={record['batch_size']} {record['data']}")
    )
    filled = round(20 * done / total)
    print(
        f"[{'#' * filled}{'.' * (20 - filled)}] {done}/{total} {record['runtime']:<12} "
        f"np={record['ranks']} {what}: {_figure(record)}{tag} "
        f"in {record['wall_s']:.1f} s; ETA {eta // 60:.0f} min {eta % 60:02.0f} s",
        file=sys.stderr,
        flush=True,
    )
