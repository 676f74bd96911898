"""`kit run --image REF`: a campaign of the user's own image, their --command with its
figure read by --metric, or kit's own benchmarks added to that image (--bench); checked
with the checks kit's images share (checks), then the same design, statistics and report.
A request with --bench is handed back to `request`, as a kit campaign in that image."""

import dataclasses
import re

from kit import runtimes
from kit.analysis.findings import REFERENCE
from kit.core import benches, command
from kit.core.errors import KitError
from kit.image import foreign
from kit.image.foreign import Foreign
from kit.run import options, plan
from kit.run.checks import (
    Campaign,
    RunRequest,
    baseline_arm,
    check_numbers,
    check_size,
    given,
    names,
    precision_target,
    resume_spec,
    runtime_options,
    site_and_ranks,
)
from kit.runtimes import Runtime

FOREIGN_RUNTIMES = ("native", "docker", "podman", "singularity", "charliecloud")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _command(q: RunRequest, ranks: list[int]) -> command.Command:
    """--command and how its figure is read, checked."""
    if q.command is None or q.metric is None:
        raise KitError(
            "--image needs --command 'CMD' (what to run in it) and --metric REGEX (the "
            "figure it prints, as a named group), e.g. --metric "
            "'throughput: (?P<throughput>[0-9.]+)'"
        )
    name = q.name or "command"
    if not NAME.match(name) or name in benches.BENCHES:
        raise KitError(
            f"--name '{name}' must be letters, digits, '.', '_' or '-' (64 at most) and not "
            f"one of kit's benchmarks ({', '.join(benches.BENCHES)})"
        )
    reduce = q.reduce or ("last" if max(ranks) == 1 else None)
    if reduce is None:
        raise KitError(
            f"--np {max(ranks)}: say how the ranks' figures make the trial's, "
            f"--reduce {'|'.join(command.REDUCTIONS)} (sum for a per-rank throughput)"
        )
    if reduce not in command.REDUCTIONS:
        raise KitError(f"--reduce '{reduce}' must be one of {', '.join(command.REDUCTIONS)}")
    return command.Command(
        name,
        command.split("--command", q.command),
        command.split("--native-command", q.native_command) if q.native_command else (),
        command.pattern(q.metric),
        q.unit,
        not q.lower_is_better,
        reduce,
        command.checked_require(q.require) if q.require else "",
    )


def campaign(q: RunRequest, made: tuple[Foreign, str | None] | None = None) -> Campaign:
    """A campaign of the user's own image and command: the same design, statistics and
    report as kit's benchmarks, one configuration per rank count. made: the image and host
    launcher prepare() made (None: the image as REF names it, the launcher as given)."""
    if flag := given(q, options.KIT_BENCH):
        raise KitError(f"{flag} is for kit's own benchmarks; with --image, --command runs")
    chosen = _runtimes(q, native=True)
    check_numbers(q)
    ranks = site_and_ranks(q)[1]
    cmd = _command(q, ranks)
    arms = [rt.arm for rt in chosen]
    launches = q.baseline_launches or plan.baseline_launches(arms)
    check_size(q, arms, launches, len(ranks), {"--np": len(ranks)})
    if any(rt.runs == "host" for rt in chosen) and not cmd.native_argv:
        raise KitError(
            "--runtime native with --image needs --native-command 'CMD', the same workload "
            "on this host (your modules or venv); or leave native out and compare the "
            "containers (--baseline docker)"
        )
    if cmd.native_argv and "native" not in arms:
        raise KitError("--native-command is the native arm's: add native to --runtime")
    image, mpirun = made or (foreign.resolve(q.foreign_image), q.mpirun)
    image = dataclasses.replace(image, benchmarks=(cmd.name,))
    default = REFERENCE if REFERENCE in arms else arms[0]
    baseline = baseline_arm(dataclasses.replace(q, baseline=q.baseline or default), chosen)
    target = precision_target(q, chosen, baseline)
    runtime_args = runtime_options(q.runtime_arg, chosen)
    configs = [plan.Config(cmd.name, "-", 0, n, "-") for n in ranks]
    design = plan.Design(arms, configs, q.repeats, q.warmup_trials, q.seed, target, launches)
    opts = plan.Options(0, 0, q.timeout, mpirun, runtime_args, {cmd.name: []}, command=cmd)
    spec = {
        "image": image.source,
        "image_digest": image.digest,
        "image_mpi": image.mpi_library or None,
        "command": dataclasses.asdict(cmd),
        **resume_spec(q, design, runtime_args),
        "baseline": baseline,
    }
    return Campaign(image, "cpu", chosen, design, opts, spec)


def bench_request(
    q: RunRequest, made: tuple[Foreign, str | None] | None = None
) -> tuple[RunRequest, Foreign]:
    """kit's own benchmarks in the user's image (prepare adds them as a layer when its
    Python has what they import); the request and image then make a campaign like any kit
    image's (request.kit_campaign; no native arm: kit's native environment is made from a
    kit recipe's pins). made: as campaign's."""
    if flag := given(q, options.COMMAND):
        raise KitError(f"{flag} goes with --command; --bench runs kit's own benchmark")
    chosen = _runtimes(q, native=False)
    wanted = names("--bench", q.bench)
    for b in wanted:
        benches.get(b)  # a KitError naming the known ones
    if made is None:
        named = dataclasses.replace(foreign.resolve(q.foreign_image), benchmarks=tuple(wanted))
        made = named, q.mpirun
    image, mpirun = made
    return dataclasses.replace(q, baseline=q.baseline or chosen[0].arm, mpirun=mpirun), image


def prepare(q: RunRequest, c: Campaign, plan_only: bool) -> tuple[Foreign, str | None]:
    """The checked campaign's image (the user's) made usable: a docker save archive
    loaded into the engine, kit's benchmarks added as a layer (neither by a dry run); then
    the MPI its ranks load, read from its files (its squashfs made for that, by a dry run
    too), and the host launcher that can start them."""
    image = c.recipe  # a Foreign: request.prepare's
    if not plan_only:
        image = foreign.loaded(image)
    if c.opts.command is None:  # kit's benchmarks, in the user's image
        image = foreign.with_benchmarks(image, list(image.benchmarks), plan_only)
    return mpi_launcher(image, c.runtimes, q, [cfg.ranks for cfg in c.design.configs])


def _runtimes(q: RunRequest, native: bool) -> list[Runtime]:
    """The runtimes asked for, each one that runs a foreign image, on this host (native:
    whether a native arm can be had, i.e. the user's --native-command)."""
    if q.launcher != "local" or q.hosts or q.hostfile:
        raise KitError(
            "--image runs its trials on this host for now: leave out --launcher and --hosts"
        )
    allowed = tuple(r for r in FOREIGN_RUNTIMES if native or r != "native")
    chosen = runtimes.parse(q.runtime)
    for rt in chosen:
        if rt.runs == "host" and not native:
            raise KitError(
                "--bench with --image has no native arm (kit's native environment is made "
                "from a kit recipe's pins): leave native out, or measure your own command "
                "with --command and --native-command"
            )
        if rt.name not in allowed:
            raise KitError(
                f"runtime '{rt.name}' does not run --image yet; use {', '.join(allowed)}"
            )
    return chosen


def mpi_launcher(
    image: Foreign, chosen: list[Runtime], q: RunRequest, ranks: list[int]
) -> tuple[Foreign, str | None]:
    """The MPI the image's ranks load, read from its files, and the host launcher that
    can start them (at one rank: neither is needed). A hybrid runtime's ranks are
    started by the host's mpirun, which must be of the same family (Open MPI ranks
    under MPICH's Hydra each see a world of one); Docker and Podman start them with the
    image's own."""
    if max(ranks) == 1:
        return image, q.mpirun
    found = foreign.mpi_of(image)
    if found is None:
        raise KitError(
            f"--np {max(ranks)}: '{image.source}' holds no MPI library (libmpi.so.12 or .40), so "
            "its ranks cannot be started together; run it at --np 1"
        )
    mpi, library = found
    image = dataclasses.replace(image, mpi=mpi, mpi_library=library)
    launcher = q.mpirun or foreign.launcher_for(mpi.flavour)
    hybrid = [rt.name for rt in chosen if not rt.ranks_inside and rt.runs != "host"]
    host = foreign.flavour_of_launcher(launcher)
    if hybrid and host is not None and host != mpi.flavour:
        raise KitError(
            f"'{image.source}' carries {mpi.flavour} ({library}) but '{launcher}' is "
            f"{host}'s launcher: {', '.join(hybrid)} ranks would not find each other; pass "
            f"--mpirun {foreign.launcher_for(mpi.flavour)}, or run those ranks with the "
            "image's own launcher under docker or podman"
        )
    return image, launcher
