"""`kit run`'s options as typed (RunRequest), the campaign a checked request makes, and the
checks both kinds of request share: kit's images (request) and a user's own (own_image).

Each check names the bad option and its fix in a KitError, before anything runs. Both
requests read these; neither reads the other: request picks which one checks a request.
"""

import argparse
import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from kit import runtimes
from kit.analysis.findings import ALL_PAIRS, REFERENCE
from kit.core import units
from kit.core.errors import KitError
from kit.image.foreign import Foreign
from kit.image.recipes import Recipe
from kit.launch import slurm
from kit.run import options, plan
from kit.runtimes import Runtime


@dataclass(frozen=True)
class RunRequest:
    """kit run's options, by their dests in the options table (options.OPTIONS)."""

    image: str | None
    preset: str | None
    full: bool
    runtime: str
    bench: str | None
    model: str
    data: str
    data_dir: Path | None
    bench_arg: list[str]
    batch_size: str
    np: str
    # a user's own image and command (kit run --image REF --command ...)
    foreign_image: str | None
    command: str | None
    native_command: str | None
    metric: str | None
    unit: str
    lower_is_better: bool
    reduce: str | None
    require: str | None
    name: str | None
    repeats: int
    baseline_launches: int | None
    precision: str | None
    budget: str | None
    baseline: str | None
    confidence: float
    min_time: str
    warmup_trials: int
    steps: int
    warmup_steps: int
    seed: int
    timeout: float
    mpirun: str | None
    runtime_arg: list[str]
    launcher: str
    hosts: str | None
    hostfile: Path | None
    slurm_config: Path | None
    emit: Path | None
    variant: str
    out: Path | None
    dry_run: bool
    json: bool
    resume: bool

    @classmethod
    def of(cls, namespace: object) -> "RunRequest":
        """The request argparse parsed (kit run's parser, built by options.add_to)."""
        return cls(**{o.dest: getattr(namespace, o.dest) for o in options.OPTIONS})

    @classmethod
    def parse(cls, argv: list[str]) -> "RunRequest":
        """The request these kit run arguments make (a preset's leg's options), or a
        KitError with argparse's own words."""
        p = _Refusing(prog="kit run", add_help=False)
        options.add_to(p)
        return cls.of(p.parse_args(argv))


class _Refusing(argparse.ArgumentParser):
    """A parser whose mistakes are a KitError, not an exit."""

    def error(self, message: str) -> NoReturn:
        raise KitError(message)


@dataclass(frozen=True)
class Campaign:
    """A checked request: what to run, where its records go, and the settings --resume
    must find unchanged."""

    recipe: Recipe | Foreign
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


def given(q: RunRequest, *scopes: str) -> str | None:
    """The first option of these scopes (options.KIT_BENCH, ...) that the request sets to
    other than its default, as its flag (--native-command)."""
    return next((o.flag for o in options.scoped(*scopes) if getattr(q, o.dest) != o.default), None)


def check_numbers(q: RunRequest) -> None:
    """Every numeric option in range, before anything runs (--dry-run too); --confidence,
    which kit report takes as well, is checked first by request.check."""
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
    min_time(q)


def min_time(q: RunRequest) -> float | None:
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
        rt = runtimes.get(name)
        if rt.arm not in arms:
            raise KitError(
                f"--runtime-arg '{spec}' names '{rt.arm}', not in --runtime {','.join(arms)}"
            )
        if not rt.product:  # native: no runtime to pass it to; its records would say it was
            raise KitError(
                f"--runtime-arg '{spec}': {rt.arm} runs on the host, with no container runtime "
                "to take options; drop it"
            )
        out.setdefault(rt.arm, []).append(arg)
    return out


LAUNCHERS = ("local", "torchrun", "slurm")


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


def precision_target(q: RunRequest, chosen: list[Runtime], baseline: str) -> plan.Target | None:
    if q.precision is None:
        if q.budget is not None:
            raise KitError("--budget goes with --precision (a fixed design uses --repeats)")
        return None
    ref = REFERENCE if baseline == ALL_PAIRS else baseline
    if ref not in [rt.arm for rt in chosen]:
        raise KitError(f"--precision compares every arm with {ref}: add {ref} to --runtime")
    budget = units.duration("--budget", q.budget or "30m")
    precision = units.percent("--precision", q.precision)
    return plan.Target(precision, budget, q.confidence, baseline)


def baseline_arm(q: RunRequest, chosen: list[Runtime]) -> str:
    """The arm the report compares every other with (or every pair: 'all'), which a
    precision-targeted campaign's stop rule waits for too."""
    arms = [rt.arm for rt in chosen]
    if q.baseline is None or q.baseline == ALL_PAIRS:
        return q.baseline or REFERENCE
    if q.baseline not in arms:
        raise KitError(
            f"--baseline '{q.baseline}' is not an arm of --runtime ({', '.join(arms)}); "
            f"choose one of them, or '{ALL_PAIRS}' for every pair"
        )
    return q.baseline


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
