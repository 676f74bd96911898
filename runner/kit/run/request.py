"""`kit run`'s request: the options as typed, checked against the domain's rules (the
image's benchmarks and variants, the declared models, the runtime registry, ranks a
host can run, option ranges) before anything starts, and turned into the campaign.

The CLI only parses; every rule about what a valid campaign is lives here, in the checks
both requests share (checks) and in a user's own image's (own_image), so it holds the
same for `--dry-run`, `--emit`, `--resume` and a preset's legs. This module picks which
request it is and checks a campaign of kit's own benchmarks. Checking is pure; prepare
then makes what the checked campaign runs (a data folder, a user's image loaded, its
MPI read from a conversion).
"""

import dataclasses
import os
from pathlib import Path

from kit import runtimes
from kit.analysis.findings import REFERENCE
from kit.core import benches, paths
from kit.core.errors import KitError
from kit.image import recipes
from kit.image.foreign import Foreign
from kit.image.recipes import Recipe
from kit.launch import hosts as host_list
from kit.run import options, own_image, plan
from kit.run.checks import (
    Campaign,
    RunRequest,
    baseline_arm,
    check_numbers,
    check_size,
    given,
    ints,
    min_time,
    names,
    precision_target,
    resume_spec,
    runtime_options,
    site_and_ranks,
)
from kit.runtimes import Runtime


def check_confidence(value: float) -> None:
    """--confidence, for kit run and kit report alike."""
    if not 0.5 <= value < 1:
        raise KitError(f"--confidence {value} must be at least 0.5 and below 1, e.g. 0.95")


def check(q: RunRequest) -> Campaign:
    """The campaign the request describes, or a KitError naming the first bad option;
    pure: it makes, loads and converts nothing (prepare does, once it has passed)."""
    if q.full:  # a preset's request goes to preset_run, not here
        raise KitError("--full goes with --preset NAME (the study's own sizes)")
    if q.resume and q.out is None:  # the dry run's refusal too
        raise KitError("--resume needs --out DIR, the campaign to continue")
    check_confidence(q.confidence)
    if q.foreign_image is not None:
        if q.image is not None:
            raise KitError(f"give a kit image ('{q.image}') or --image REF, not both")
        if q.command is None and q.bench is not None:
            return kit_campaign(*own_image.bench_request(q))
        return own_image.campaign(q)
    if flag := given(q, options.COMMAND):
        raise KitError(f"{flag} goes with --image REF (your own image)")
    if q.image is None:
        raise KitError("kit run needs an IMAGE (see kit list), --image REF or --preset NAME")
    return kit_campaign(q, recipes.load(q.image))


def prepare(q: RunRequest, c: Campaign, plan_only: bool = False) -> Campaign:
    """What the checked campaign runs, made: its real-data folder; a user's image loaded,
    kit's benchmarks added to it and its MPI read (own_image.prepare); then the campaign
    of what was made. plan_only (--dry-run) makes nothing on disk but what reading the
    image's MPI needs."""
    if c.opts.data_dir is not None:
        paths.make_dir(Path(c.opts.data_dir), "--data-dir", dry_run=plan_only)
    if not isinstance(c.recipe, Foreign):
        return c
    made = own_image.prepare(q, c, plan_only)
    if c.opts.command is None:
        return kit_campaign(*own_image.bench_request(q, made))
    return own_image.campaign(q, made)


TORCHRUN_BENCHES = ("torch-cnn",)  # DDP: ranks and rendezvous from torchrun, no MPI


def kit_campaign(q: RunRequest, r: "Recipe | Foreign") -> Campaign:
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
    data_dir = _data_dir(q, data)
    min_s = min_time(q)
    bench_args = _bench_args(q.bench_arg, wanted, min_s)
    opts = plan.Options(
        q.steps,
        q.warmup_steps,
        q.timeout,
        q.mpirun,
        runtime_args,
        bench_args,
        data_dir,
        site,
        auto_min_time=min_s is None,
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
        "min_time": "auto" if min_s is None else min_s,
        "bench_args": bench_args,
        "data_dir": data_dir,
        "slurm": dataclasses.asdict(site) if site else None,
    }
    if baseline != REFERENCE:  # campaigns saved before --baseline still resume
        spec["baseline"] = baseline
    if opts.hosts:  # and those saved before --hosts
        spec["hosts"] = list(opts.hosts)
    return Campaign(r, q.variant, chosen, design, opts, spec)


def _bench_args(specs: list[str], wanted: list[str], min_s: float | None) -> dict[str, list[str]]:
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
    if min_s:
        for b in wanted:
            if not benches.is_sweep(b):
                out[b] += ["--min-time", f"{min_s:g}"]
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


def _data_dir(q: RunRequest, data: list[str]) -> str | None:
    """The real-data folder (only when real data is asked for), checked that it could be
    made (prepare makes it). One the benchmarks could neither read a data set from nor
    make one in is refused now, not in every trial."""
    if "real" not in data:
        return None
    folder = (q.data_dir or paths.cache_dir() / "datasets").resolve()
    paths.make_dir(folder, "--data-dir", dry_run=True)
    made = any(folder.glob(f"jpeg-*px-*/{benches.DATASET_STAMP}"))
    if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK) and not made:
        raise KitError(
            f"--data-dir '{folder}' holds no data set kit made (jpeg-SIDEpx-N/"
            f"{benches.DATASET_STAMP}) and is not writable, so none can be made there; give a "
            "writable folder, or one holding a data set"
        )
    return str(folder)
