"""`kit run`'s options, declared once: the parser is built from this table, RunRequest
(checks) holds its dests, and the rules saying which options go with which request (kit's
benchmarks or a user's command; a preset's own, or where its legs run) read each one's
scope. A new option is a row here and a field of RunRequest (a unit test pairs them)."""

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.core import benches
from kit.launch import slurm

# What an option is for: the scope the rules read.
CAMPAIGN = "campaign"  # any campaign's: with --preset, its legs' to set, not the user's
KIT_BENCH = "kit-bench"  # kit's own benchmarks': a user's --command takes none of them
COMMAND = "command"  # a user's command's (--image REF --command): kit's benchmarks take none
PRESET = "preset"  # the run's own: a preset takes it from the user for all its legs
WHERE = "where"  # where a preset's legs run: the user's to say


@dataclass(frozen=True)
class Option:
    """One option of kit run, as argparse takes it, and its scope."""

    flags: tuple[str, ...]  # none: the positional IMAGE
    dest: str
    help: str
    scope: str = CAMPAIGN
    group: str | None = None  # its heading in kit run --help (None: options)
    default: object = None
    type: Callable[[str], object] | None = None
    action: str | None = None
    metavar: str | None = None
    nargs: str | None = None

    @property
    def flag(self) -> str:
        """How a message names it: --batch-size, IMAGE."""
        return self.flags[0] if self.flags else str(self.metavar)


def _option(flag: str, help: str, dest: str | None = None, **kw: Any) -> Option:
    """An option whose dest is its flag's, as argparse derives it, unless named."""
    return Option((flag,), dest or flag.removeprefix("--").replace("-", "_"), help, **kw)


WHAT = "what runs: each list multiplies the campaign"
OWN = "your own image and command (instead of IMAGE and kit's benchmarks)"
ROUNDS = "how many rounds, and what is compared"
TRIAL = "each trial"
LAUNCH = "how trials are launched"
RESULTS = "results"

OPTIONS: tuple[Option, ...] = (
    Option(
        (), "image", "a kit image (kit list), or --image / --preset", metavar="IMAGE", nargs="?"
    ),
    _option(
        "--preset",
        "run a study's experiment (kit presets lists them): each leg a campaign in "
        "OUT/LEG, then the report with the published figures beside the measured ones",
        scope=PRESET,
        metavar="NAME",
    ),
    _option(
        "--full",
        "with --preset: the study's own sizes (CUDA images, its batch sizes and "
        "rank counts) for a real cluster, instead of the 2-core sizes",
        scope=PRESET,
        action="store_true",
        default=False,
    ),
    _option(
        "--runtime",
        "comma-separated runtimes (listed below); NAME@LABEL adds another arm of a "
        "runtime, e.g. native,native@b for an A/A check (default: %(default)s)",
        group=WHAT,
        default="native,docker,singularity,charliecloud",
    ),
    _option(
        "--bench",
        "comma-separated entry points from the image's list (`kit list`), of "
        f"{', '.join(benches.BENCHES)} (default: the image's first)",
        scope=KIT_BENCH,
        group=WHAT,
    ),
    _option(
        "--model",
        "comma-separated: tiny, alexnet, resnet50, resnet101, resnet152, inception3 "
        "(default: %(default)s)",
        scope=KIT_BENCH,
        group=WHAT,
        default="tiny",
    ),
    _option(
        "--data",
        "synthetic, real, or synthetic,real for the I/O overhead (default: %(default)s)",
        scope=KIT_BENCH,
        group=WHAT,
        default="synthetic",
    ),
    _option(
        "--data-dir",
        "host folder for the real-data JPEG set, made on first use and bound into "
        "containers (default: ~/.cache/kit/datasets)",
        scope=KIT_BENCH,
        group=WHAT,
        type=Path,
    ),
    _option(
        "--bench-arg",
        "pass ARG to every benchmark, e.g. --bench-arg=--precision=bf16, or to one "
        "only, e.g. --bench-arg=mpi:--time-per-size=0.05 (repeatable)",
        scope=KIT_BENCH,
        group=WHAT,
        action="append",
        default=[],
        metavar="[BENCH:]ARG",
    ),
    _option(
        "--batch-size",
        "per-rank batch sizes, e.g. 16,32",
        scope=KIT_BENCH,
        group=WHAT,
        default="32",
    ),
    _option("--np", "rank counts, e.g. 1,2 (>1 uses mpirun)", group=WHAT, default="1"),
    _option(
        "--image",
        "an image kit did not build: docker:NAME[:TAG] (in the local engine), PATH.tar "
        "(docker save; loaded into the engine) or PATH.sif (singularity and charliecloud "
        "only); converted and cached by digest like kit's own",
        dest="foreign_image",
        group=OWN,
        metavar="REF",
    ),
    _option(
        "--command",
        "what runs in the image, split like a shell line but run without one, e.g. "
        "'python train.py --epochs 1' (the image's entrypoint is bypassed)",
        scope=COMMAND,
        group=OWN,
        metavar="CMD",
    ),
    _option(
        "--native-command",
        "the same workload on this host (your modules or venv), for --runtime native",
        scope=COMMAND,
        group=OWN,
        metavar="CMD",
    ),
    _option(
        "--metric",
        "the figure the command prints, as one named group whose name names it, e.g. "
        "'throughput: (?P<throughput>[0-9.]+) samples/s'; a trial without a match fails",
        scope=COMMAND,
        group=OWN,
        metavar="REGEX",
    ),
    _option("--unit", "the figure's unit, e.g. samples/s", scope=COMMAND, group=OWN, default=""),
    _option(
        "--lower-is-better",
        "the figure is a time or a latency (default: higher is better)",
        scope=COMMAND,
        group=OWN,
        action="store_true",
        default=False,
    ),
    _option(
        "--reduce",
        "how every matching line (one per rank, or per epoch) makes the trial's figure: "
        "last (the default at one rank), first, sum, mean, median, min, max",
        scope=COMMAND,
        group=OWN,
        metavar="HOW",
    ),
    _option(
        "--require",
        "a line the output must hold for the trial to count (besides exit status 0)",
        scope=COMMAND,
        group=OWN,
        metavar="REGEX",
    ),
    _option(
        "--name",
        "the workload's name in records and headings (default: command)",
        scope=COMMAND,
        group=OWN,
    ),
    _option(
        "--repeats",
        "measured trials per runtime and configuration (default: 8; "
        "a 95%% interval of a median needs at least 6)",
        group=ROUNDS,
        type=int,
        default=8,
    ),
    _option(
        "--baseline-launches",
        "launches of native in every round (default: about the square root of the "
        "number of arms compared with it, which narrows every comparison's interval the "
        "most per minute: 2 for four container runtimes; 1 with a single one)",
        group=ROUNDS,
        type=int,
        metavar="N",
    ),
    _option(
        "--precision",
        "keep adding rounds until every comparison (with native, or as --baseline "
        "says) is known to within ±PCT (e.g. 2%%), or --budget is spent; --repeats is then "
        "the fewest rounds",
        group=ROUNDS,
        metavar="PCT",
    ),
    _option(
        "--budget",
        "with --precision: the most wall time to spend, e.g. 30m, 90s, 1h (default 30m)",
        group=ROUNDS,
        metavar="TIME",
    ),
    _option(
        "--baseline",
        "the arm every other is compared with (default: native), e.g. docker; 'all' "
        "also compares every other pair (e.g. singularity over docker) in one family. "
        "--precision waits for these comparisons, and kit report uses it unless given "
        "its own",
        group=ROUNDS,
        metavar="ARM|all",
    ),
    _option(
        "--confidence",
        "with --precision: the confidence the whole report's verdicts hold at "
        "(default: %(default)s)",
        group=ROUNDS,
        type=float,
        default=0.95,
    ),
    _option(
        "--min-time",
        "each training trial times at least --steps steps and at least this long "
        "(more steps if needed; 0: off, the default). auto: the length that narrows the "
        "intervals most per minute, from the warm-up round's start-up and step times "
        "(longer trials average the steps' noise but not the launch's own offset)",
        scope=KIT_BENCH,
        group=TRIAL,
        default="0",
        metavar="SECONDS|auto",
    ),
    _option(
        "--warmup-trials",
        "discarded rounds first (default: %(default)s)",
        group=TRIAL,
        type=int,
        default=1,
    ),
    _option(
        "--steps",
        "timed steps per trial (default: %(default)s)",
        group=TRIAL,
        type=int,
        default=100,
    ),
    _option("--warmup-steps", "untimed steps per trial", group=TRIAL, type=int, default=5),
    _option("--seed", "seed of the interleaving order", group=TRIAL, type=int, default=0),
    _option("--timeout", "seconds per trial", group=TRIAL, type=float, default=600),
    _option("--mpirun", "host launcher (default: the flavour's, e.g. mpirun.mpich)", group=LAUNCH),
    _option(
        "--runtime-arg",
        "pass ARG to one runtime arm, e.g. docker:--cpus=1.5 (repeatable)",
        group=LAUNCH,
        action="append",
        default=[],
        metavar="RUNTIME:ARG",
    ),
    _option(
        "--launcher",
        "local: the flavour's mpirun on this host (default); torchrun: PyTorch's own "
        "launcher on this host, all ranks in one container (torch-cnn only, no MPI); slurm: "
        "each trial is a batch job (submitted, then waited for), ranks started by srun "
        "--mpi=pmi2 (MPICH) or mpirun",
        group=LAUNCH,
        default="local",
    ),
    _option(
        "--hosts",
        "start the ranks over ssh on these hosts, one rank a host in turn, with the "
        "image flavour's own launcher (MPICH's Hydra -hosts, Open MPI's -H), no scheduler; "
        "each rank in the runtime on its host: native, singularity, singularity-bind, "
        "charliecloud, and podman or docker with MPICH images (each host's own engine, a "
        "container per rank). Checked before the first trial: each host answers ssh without "
        "a prompt, holds the same image conversion, native environment or engine image (its "
        "digest compared) and, for docker, answers from an engine of its own. With "
        "--preset: its legs that say how they run across nodes run a second time over these "
        "hosts, as LEG-nodes",
        scope=WHERE,
        group=LAUNCH,
        metavar="H1,H2",
    ),
    _option(
        "--hostfile",
        "the hosts of --hosts, one a line ('#' comments; a slot count after the name is ignored)",
        scope=WHERE,
        group=LAUNCH,
        type=Path,
        metavar="FILE",
    ),
    _option(
        "--slurm-config",
        "site settings for Slurm jobs: a TOML [slurm] table (partition, account, time, "
        "tasks_per_node, options, setup, mpi; and the runtimes' own: "
        + "; ".join(f"{k}: {o.help}" for k, o in slurm.RUNTIME_OPTIONS.items())
        + "); with --preset --full, for every leg",
        scope=WHERE,
        group=LAUNCH,
        type=Path,
        metavar="FILE",
    ),
    _option(
        "--emit",
        "with --launcher slurm: write each trial's sbatch script to DIR, submit nothing",
        group=LAUNCH,
        type=Path,
        metavar="DIR",
    ),
    _option("--variant", "cpu (default) or cuda", scope=KIT_BENCH, group=LAUNCH, default="cpu"),
    _option(
        "--out",
        "results directory (default: results/IMAGE-TIME)",
        scope=PRESET,
        group=RESULTS,
        type=Path,
    ),
    _option(
        "--dry-run",
        "print the plan, run nothing",
        scope=PRESET,
        group=RESULTS,
        action="store_true",
        default=False,
    ),
    _option(
        "--json",
        "with --dry-run: print the plan as JSON (docs/schemas/output/run.json)",
        group=RESULTS,
        action="store_true",
        default=False,
    ),
    _option(
        "--resume",
        "continue the campaign in --out (same options): run only trials not yet finished",
        scope=PRESET,
        group=RESULTS,
        action="store_true",
        default=False,
    ),
)


def scoped(*scopes: str) -> list[Option]:
    """The options of these scopes, in the table's order."""
    return [o for o in OPTIONS if o.scope in scopes]


def add_to(p: argparse.ArgumentParser) -> None:
    """Declare every option on kit run's parser, each group's under its heading in the
    table's order."""
    groups: dict[str | None, argparse._ActionsContainer] = {None: p}
    for o in OPTIONS:
        if o.group not in groups:
            groups[o.group] = p.add_argument_group(o.group)
        kw = {"help": o.help, "default": o.default, "type": o.type, "action": o.action}
        kw |= {"metavar": o.metavar, "nargs": o.nargs}
        given = {k: v for k, v in kw.items() if v is not None}
        if o.flags:
            groups[o.group].add_argument(*o.flags, dest=o.dest, **given)
        else:
            groups[o.group].add_argument(o.dest, **given)
