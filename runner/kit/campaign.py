"""`kit run`: plan trials over runtimes x configurations, run them interleaved, record each.

Rounds interleave runtimes in a seeded random order, so slow drift on the host
(thermal, page cache, a neighbour's job) falls on every runtime alike, and the
first round(s) are warm-up trials, recorded but flagged and left out of reports.
The campaign's settings are saved beside its results, so `--resume` can run
exactly the trials that have not finished.
"""

import dataclasses
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

from . import results, trial
from .errors import KitError
from .recipes import Recipe
from .runtimes import Job, Runtime
from .runtimes.base import first_line, user_env

BENCHES = {"torch-cnn": "torch_cnn.py", "caffe2-cnn": "caffe2_cnn.py"}
SPEC_FILE = "campaign.json"
FINISHED = ("ok", "failed")  # a timeout or an interrupted trial runs again on --resume


@dataclass(frozen=True)
class Config:
    bench: str
    model: str
    batch_size: int
    ranks: int


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
    if any(p.config.ranks > 1 for p in trials) and shutil.which(mpirun) is None:
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
        program = [
            prep.python,
            f"{prep.bench_dir}/{BENCHES[c.bench]}",
            "--model",
            c.model,
            "--batch-size",
            str(c.batch_size),
            "--steps",
            str(opts.steps),
            "--warmup",
            str(opts.warmup_steps),
            "--launch-time",
            f"{time.time():.6f}",
        ]
        job = Job(program, c.ranks, mpirun, name, opts.runtime_args.get(rt.arm, []))
        argv = rt.command(prep, job)
        started = datetime.now(UTC).isoformat(timespec="seconds")
        outcome = trial.run(
            argv, {**env, **rt.env}, opts.timeout, name, lambda rt=rt, job=job: rt.cleanup(job)
        )
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
            "launcher": rt.launcher(c.ranks),
            "mpirun": mpirun_version if c.ranks > 1 else None,
            "ranks": c.ranks,
            "bench": c.bench,
            "model": c.model,
            "batch_size": c.batch_size,
            "image": recipe.name,
            "recipe_version": recipe.version,
            "variant": variant,
            "image_digest": prep.digest,
            "image_ref": prep.ref,
            "argv": argv,
            "host": host,
            "started": started,
            "wall_s": round(outcome.wall_s, 4),
            "status": outcome.status,
            "exit_code": outcome.exit_code,
            "result": outcome.result,
            "output_tail": outcome.output_tail if outcome.status != "ok" else "",
        }
        results.append(out_dir, record)
        _progress(n + 1, len(todo), record, time.monotonic() - t_start)
        if outcome.status == "interrupted":
            raise KeyboardInterrupt


def _progress(done: int, total: int, record: dict, elapsed: float) -> None:
    eta = elapsed / done * (total - done)
    r = record["result"]
    figure = f"{r['images_per_sec']:.1f} images/s" if r else record["status"].upper()
    tag = " (warm-up)" if record["warmup"] else ""
    filled = round(20 * done / total)
    print(
        f"[{'#' * filled}{'.' * (20 - filled)}] {done}/{total} {record['runtime']:<12} "
        f"np={record['ranks']} "
        f"{record['model']} bs={record['batch_size']}: {figure}{tag} "
        f"in {record['wall_s']:.1f} s; ETA {eta // 60:.0f} min {eta % 60:02.0f} s",
        file=sys.stderr,
        flush=True,
    )
