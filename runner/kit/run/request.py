"""`kit run`'s request: the options as typed, checked against the domain's rules (the
image's benchmarks and variants, the declared models, the runtime registry, ranks a
host can run, option ranges) before anything starts, and turned into the campaign.

The CLI only parses; every rule about what a valid campaign is lives here, so it
holds the same for `--dry-run`, `--emit`, `--resume` and a preset's legs. A user's own
image (--image) is `own_image`'s, on the same checks.
"""

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path

from kit import runtimes
from kit.core import benches, paths, units
from kit.core.errors import KitError
from kit.image import recipes
from kit.image.foreign import Foreign
from kit.image.recipes import Recipe
from kit.launch import hosts as host_list
from kit.launch import slurm
from kit.results import analysis
from kit.run import plan
from kit.runtimes import Runtime


@dataclass(frozen=True)
class RunRequest:
    """kit run's options, named as on the command line (argparse dests)."""

    image: str | None
    variant: str
    runtime: str
    bench: str | None
    model: str
    batch_size: str
    np: str
    data: str
    data_dir: Path | None
    bench_arg: list[str]
    repeats: int
    baseline_launches: int | None
    warmup_trials: int
    steps: int
    warmup_steps: int
    min_time: str
    seed: int
    timeout: float
    mpirun: str | None
    runtime_arg: list[str]
    launcher: str
    hosts: str | None
    hostfile: Path | None
    slurm_config: Path | None
    emit: Path | None
    precision: str | None
    budget: str | None
    confidence: float
    baseline: str | None
    resume: bool
    out: Path | None
    # a user's own image and command (kit run --image REF --command ...)
    foreign_image: str | None = None
    command: str | None = None
    native_command: str | None = None
    metric: str | None = None
    unit: str = ""
    lower_is_better: bool = False
    reduce: str | None = None
    require: str | None = None
    name: str | None = None

    @classmethod
    def of(cls, namespace: object) -> "RunRequest":
        return cls(**{f.name: getattr(namespace, f.name) for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class Campaign:
    """A checked request: what to run, where its records go, and the settings --resume
    must find unchanged."""

    recipe: "Recipe | Foreign"
    variant: str
    runtimes: list[Runtime]
    design: plan.Design
    opts: plan.Options
    spec: dict


def ints(flag: str, spec: str) -> list[int]:
    try:
        values = [int(v) for v in spec.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise KitError(f"{flag} '{spec}' must be comma-separated positive integers, e.g. 1,2")
    if any(v >= 2**31 for v in values):
        raise KitError(f"{flag} '{spec}' is out of range; give values below 2147483648")
    return list(dict.fromkeys(values))  # 4,4 is one configuration, not two a round


def names(flag: str, spec: str) -> list[str]:
    values = [v.strip() for v in spec.split(",") if v.strip()]
    if not values:
        raise KitError(f"{flag} '{spec}' names nothing; give a comma-separated list")
    return list(dict.fromkeys(values))


def check_confidence(value: float) -> None:
    if not 0.5 <= value < 1:
        raise KitError(f"--confidence {value} must be at least 0.5 and below 1, e.g. 0.95")


def check_numbers(q: RunRequest) -> None:
    """Every numeric option in range, before anything runs (--dry-run too)."""
    for flag, value, low in (
        ("--repeats", q.repeats, 1),
        ("--baseline-launches", 1 if q.baseline_launches is None else q.baseline_launches, 1),
        ("--warmup-trials", q.warmup_trials, 0),
        ("--steps", q.steps, 1),
        ("--warmup-steps", q.warmup_steps, 0),
    ):
        if value < low:
            raise KitError(f"{flag} {value} must be at least {low}")
    if not 0 < q.timeout < math.inf:
        raise KitError(f"--timeout {q.timeout} must be a positive number of seconds, e.g. 600")
    _min_time(q)
    check_confidence(q.confidence)


MAX_TRIALS = 100_000  # the fixed rounds of one campaign: over a day even at a second a trial


def check_size(
    q: RunRequest, arms: list[str], launches: int, configs: int, dims: dict[str, int]
) -> None:
    """Refuse a campaign whose fixed rounds exceed MAX_TRIALS, from the options' counts
    alone: before its configurations, its plan or a dry run's listing are built (a
    --repeats of 10**9 would fill the memory before the first trial)."""
    rounds = q.warmup_trials + q.repeats
    per_config = sum(launches if arm == plan.BASELINE else 1 for arm in arms)
    trials = rounds * configs * per_config
    if trials <= MAX_TRIALS:
        return
    counted = " x ".join(f"{n} {flag}" for flag, n in dims.items())
    extra = f", {plan.BASELINE} {launches} times" if plan.BASELINE in arms and launches > 1 else ""
    raise KitError(
        f"the campaign would run {trials} trials: {rounds} rounds (--warmup-trials "
        f"{q.warmup_trials} + --repeats {q.repeats}) x {configs} configurations ({counted}) x "
        f"{per_config} launches ({len(arms)} --runtime arms{extra}); one campaign runs at most "
        f"{MAX_TRIALS}: lower these, or split it into campaigns"
    )


def runtime_options(specs: list[str], chosen: list[Runtime]) -> dict[str, list[str]]:
    arms = [rt.arm for rt in chosen]
    out: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, arg = spec.partition(":")
        if not sep or not arg:
            raise KitError(f"--runtime-arg '{spec}' must be RUNTIME:ARG, e.g. docker:--cpus=1.5")
        arm = runtimes.get(name).arm
        if arm not in arms:
            raise KitError(
                f"--runtime-arg '{spec}' names '{arm}', not in --runtime {','.join(arms)}"
            )
        out.setdefault(arm, []).append(arg)
    return out


def _min_time(q: RunRequest) -> float | None:
    """--min-time in seconds, or None for auto (chosen after the warm-up round)."""
    if q.min_time == "auto":
        if q.warmup_trials < 1:
            raise KitError("--min-time auto measures the warm-up round: use --warmup-trials 1")
        return None
    try:
        value = float(q.min_time)
    except ValueError:
        value = -1.0
    if not 0 <= value < math.inf:
        raise KitError(f"--min-time {q.min_time} must be 0 (off), a number of seconds or auto")
    return value


def _bench_args(
    specs: list[str], wanted: list[str], min_time: float | None
) -> dict[str, list[str]]:
    """Each benchmark's pass-through options: ARG goes to every benchmark, BENCH:ARG to
    that one only (a campaign of torch-cnn and the MPI sweep can shorten the sweep alone),
    --min-time to the training benchmarks (a sweep has no steps to lengthen)."""
    out: dict[str, list[str]] = {b: [] for b in wanted}
    for spec in specs:
        name, sep, arg = spec.partition(":")
        if sep and arg.startswith("-") and not name.startswith("-") and name not in benches.BENCHES:
            # BENCH:--option with a BENCH that is none: every trial would fail on it
            raise KitError(
                f"--bench-arg '{spec}' names no benchmark '{name}' (known: "
                f"{', '.join(benches.BENCHES)}); use BENCH:ARG, or ARG for every benchmark"
            )
        if not (sep and name in benches.BENCHES):
            for b in wanted:
                out[b].append(spec)
        elif not arg:
            raise KitError(f"--bench-arg '{spec}' must be BENCH:ARG, e.g. mpi:--max-bytes=65536")
        elif name not in wanted:
            listed = ",".join(wanted)
            raise KitError(f"--bench-arg '{spec}' names '{name}', not in --bench {listed}")
        else:
            out[name].append(arg)
    if min_time:
        for b in wanted:
            if not benches.is_sweep(b):
                out[b] += ["--min-time", f"{min_time:g}"]
    return out


def _benchmarks(q: RunRequest, r: Recipe) -> tuple[list[str], list[str], list[str]]:
    """The benchmarks, models and data modes asked for, each known to the image."""
    wanted = names("--bench", q.bench) if q.bench else [r.benchmarks[0]]
    models = names("--model", q.model)
    data = names("--data", q.data)
    for b in wanted:
        if b not in r.benchmarks:
            raise KitError(
                f"--bench '{b}': image '{r.name}' has {', '.join(r.benchmarks)}; pick one of those"
            )
        if benches.is_sweep(b):
            continue
        known = benches.get(b).models
        for m in models:
            if m not in known:
                raise KitError(
                    f"--model '{m}' is not a model of {b}; choose from {', '.join(known)}"
                )
    for d in data:
        if d not in ("synthetic", "real"):
            raise KitError(f"--data '{d}' must be synthetic, real or both (synthetic,real)")
    return wanted, models, data


LAUNCHERS = ("local", "torchrun", "slurm")
TORCHRUN_BENCHES = ("torch-cnn",)  # DDP: ranks and rendezvous from torchrun, no MPI


def site_and_ranks(q: RunRequest) -> tuple[slurm.Site | None, list[int]]:
    """The Slurm site (None: local) and the rank counts, which a local host must fit."""
    if q.launcher not in LAUNCHERS:
        raise KitError(f"--launcher '{q.launcher}' must be local (mpirun), torchrun or slurm")
    if (q.emit or q.slurm_config) and q.launcher != "slurm":
        raise KitError("--emit and --slurm-config go with --launcher slurm")
    site = slurm.load_site(q.slurm_config) if q.launcher == "slurm" else None
    ranks = ints("--np", q.np)
    cores = os.cpu_count() or 1
    if q.launcher != "slurm" and not (q.hosts or q.hostfile) and max(ranks) > cores:
        raise KitError(
            f"--np {max(ranks)} is more ranks than this host's {cores} cores; "
            "use at most that many locally, or --launcher slurm for more nodes"
        )
    return site, ranks


def _hosts(q: RunRequest, chosen: list[Runtime]) -> tuple[str, ...]:
    """--hosts/--hostfile: the host list, for runtimes whose ranks the host launcher starts."""
    names = host_list.parse(q.hosts, q.hostfile)
    if not names:
        return ()
    if q.launcher != "local":
        raise KitError(f"--hosts starts ranks over ssh itself; leave out --launcher {q.launcher}")
    if other := [rt for rt in chosen if not rt.host_list]:
        able = ", ".join(name for name, cls in runtimes.RUNTIMES.items() if cls.host_list)
        raise KitError(
            f"runtime '{other[0].arm}' is not run by kit on hosts it reaches over ssh; --hosts "
            f"runs the runtimes whose ranks the launcher starts on each host: {able}"
        )
    return names


def precision_target(q: RunRequest, chosen: list[Runtime], baseline: str) -> plan.Target | None:
    if q.precision is None:
        if q.budget is not None:
            raise KitError("--budget goes with --precision (a fixed design uses --repeats)")
        return None
    ref = analysis.REFERENCE if baseline == analysis.ALL_PAIRS else baseline
    if ref not in [rt.arm for rt in chosen]:
        raise KitError(f"--precision compares every arm with {ref}: add {ref} to --runtime")
    budget = units.duration("--budget", q.budget or "30m")
    precision = units.percent("--precision", q.precision)
    return plan.Target(precision, budget, q.confidence, baseline)


def baseline_arm(q: RunRequest, chosen: list[Runtime]) -> str:
    """The arm the report compares every other with (or every pair: 'all'), which a
    precision-targeted campaign's stop rule waits for too."""
    arms = [rt.arm for rt in chosen]
    if q.baseline is None or q.baseline == analysis.ALL_PAIRS:
        return q.baseline or analysis.REFERENCE
    if q.baseline not in arms:
        raise KitError(
            f"--baseline '{q.baseline}' is not an arm of --runtime ({', '.join(arms)}); "
            f"choose one of them, or '{analysis.ALL_PAIRS}' for every pair"
        )
    return q.baseline


def _data_dir(q: RunRequest, data: list[str], plan_only: bool) -> str | None:
    """The real-data folder, made if missing (only when real data is asked for; a dry run
    only checks that it could be). One the benchmarks could neither read a data set from
    nor make one in is refused now, not in every trial."""
    if "real" not in data:
        return None
    folder = (q.data_dir or paths.cache_dir() / "datasets").resolve()
    paths.make_dir(folder, "--data-dir", dry_run=plan_only)
    made = any(folder.glob(f"jpeg-*px-*/{benches.DATASET_STAMP}"))
    if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK) and not made:
        raise KitError(
            f"--data-dir '{folder}' holds no data set kit made (jpeg-SIDEpx-N/"
            f"{benches.DATASET_STAMP}) and is not writable, so none can be made there; give a "
            "writable folder, or one holding a data set"
        )
    return str(folder)


def resume_spec(q: RunRequest, design: plan.Design, runtime_args: dict) -> dict:
    """What --resume must find unchanged in campaign.json, whatever the workload."""
    target = design.target
    return {
        "runtimes": design.runtimes,
        "configs": [dataclasses.asdict(c) for c in design.configs],
        "repeats": q.repeats,
        "baseline_launches": design.baseline_launches,
        "warmup_trials": q.warmup_trials,
        "seed": q.seed,
        "precision": target.precision if target else None,
        "budget_s": target.budget_s if target else None,
        "confidence": q.confidence,
        "runtime_args": runtime_args,
        "launcher": q.launcher,
    }


def check(q: RunRequest, plan_only: bool = False) -> Campaign:
    """The campaign the request describes, or a KitError naming the first bad option.
    plan_only (--dry-run) makes nothing on disk."""
    from kit.run import own_image  # built on this module's checks

    if q.resume and q.out is None:  # the dry run's refusal too
        raise KitError("--resume needs --out DIR, the campaign to continue")
    if q.foreign_image is not None:
        return own_image.campaign(q, plan_only)
    if flag := given(q, own_image.COMMAND_ONLY):
        raise KitError(f"{flag} goes with --image REF (your own image)")
    if q.image is None:
        raise KitError("kit run needs an IMAGE (see kit list), --image REF or --preset NAME")
    return kit_campaign(q, recipes.load(q.image), plan_only)


def kit_campaign(q: RunRequest, r: "Recipe | Foreign", plan_only: bool) -> Campaign:
    """A campaign of kit's own benchmarks, in a kit image or one they were added to."""
    if q.variant not in r.variants:
        raise KitError(
            f"--variant '{q.variant}': image '{r.name}' has {', '.join(r.variants)}; pick one"
        )
    chosen = runtimes.parse(q.runtime)
    check_numbers(q)
    wanted, models, data = _benchmarks(q, r)
    site, ranks = site_and_ranks(q)
    if q.launcher == "torchrun" and (other := [b for b in wanted if b not in TORCHRUN_BENCHES]):
        raise KitError(
            f"--launcher torchrun starts PyTorch's own ranks, which only "
            f"{', '.join(TORCHRUN_BENCHES)} (DDP) uses; run {', '.join(other)} in a campaign "
            "of its own with --launcher local"
        )
    baseline = baseline_arm(q, chosen)
    target = precision_target(q, chosen, baseline)
    runtime_args = runtime_options(q.runtime_arg, chosen)
    batch_sizes = ints("--batch-size", q.batch_size)
    arms = [rt.arm for rt in chosen]
    launches = q.baseline_launches or plan.baseline_launches(arms)  # 0: refused above
    sweeps = sum(benches.is_sweep(b) for b in wanted)
    trained = len(wanted) - sweeps
    dims = {"--bench": len(wanted), "--model": len(models), "--batch-size": len(batch_sizes)}
    dims |= {"--np": len(ranks), "--data": len(data)}
    count = (sweeps + trained * len(models) * len(batch_sizes) * len(data)) * len(ranks)
    check_size(q, arms, launches, count, dims)
    configs = plan.configs(wanted, models, batch_sizes, ranks, data)
    design = plan.Design(arms, configs, q.repeats, q.warmup_trials, q.seed, target, launches)
    data_dir = _data_dir(q, data, plan_only)
    min_time = _min_time(q)
    bench_args = _bench_args(q.bench_arg, wanted, min_time)
    opts = plan.Options(
        q.steps,
        q.warmup_steps,
        q.timeout,
        q.mpirun,
        runtime_args,
        bench_args,
        data_dir,
        site,
        auto_min_time=min_time is None,
        torchrun=q.launcher == "torchrun",
        hosts=_hosts(q, chosen),
    )
    spec = {
        "image": r.label,
        "recipe_version": r.version,
        "variant": q.variant,
        **resume_spec(q, design, runtime_args),
        "steps": q.steps,
        "warmup_steps": q.warmup_steps,
        "min_time": "auto" if min_time is None else min_time,
        "bench_args": bench_args,
        "data_dir": data_dir,
        "slurm": dataclasses.asdict(site) if site else None,
    }
    if baseline != analysis.REFERENCE:  # campaigns saved before --baseline still resume
        spec["baseline"] = baseline
    if opts.hosts:  # and those saved before --hosts
        spec["hosts"] = list(opts.hosts)
    return Campaign(r, q.variant, chosen, design, opts, spec)


def given(q: RunRequest, dests: tuple[str, ...]) -> str | None:
    """The first of these options the request sets, as its flag (--native-command)."""
    given = [d for d in dests if getattr(q, d) not in (None, False, "")]
    return "--" + given[0].replace("_", "-") if given else None
