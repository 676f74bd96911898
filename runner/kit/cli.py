"""The `kit` command line: one subcommand per pipeline stage."""

import argparse
import json
import signal
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from kit import __version__
from kit.core import schema
from kit.core.errors import KitError, RunFailed

if TYPE_CHECKING:
    from kit.run import presets

EPILOG = """pipeline: recipes/*.toml --render--> containers/ --build--> Docker image
  --convert--> SIF / Shifter squashfs --run--> trials.jsonl --report--> overhead table"""


def cmd_list(a: argparse.Namespace) -> None:
    from kit.image import catalog

    listed = catalog.rows()
    print(json.dumps(listed, indent=2) if a.json else catalog.table(listed, catalog.sizes()))


def _selected(names: list[str]) -> list:
    from kit.image import recipes

    return [recipes.load(n) for n in names] if names else list(recipes.load_all().values())


def cmd_render(a: argparse.Namespace) -> None:
    from kit.image import render

    chosen = _selected(a.images)
    if a.check:
        render.check(chosen)
        print(f"containers/ matches recipes/ ({len(chosen)} images)")
        return
    written = render.write(chosen)
    for p in written:
        print(f"wrote {p}")
    if not written:
        print("containers/ already up to date")


def cmd_base(a: argparse.Namespace) -> None:
    from kit.image import debian_base

    debian_base.make(a.suite, a.mirror, a.force)


def cmd_build(a: argparse.Namespace) -> None:
    from kit.image import build, convert, recipes

    r = recipes.load(a.image)
    formats = convert.parse_formats(a.to) if a.to else []
    build.build(r, a.variant, build.Options(a.ca_cert, a.no_cache, tuple(a.cache_from)))
    if formats:
        convert.convert(r, a.variant, formats)


def cmd_convert(a: argparse.Namespace) -> None:
    from kit.image import convert, recipes

    r = recipes.load(a.image)
    art = convert.convert(r, a.variant, convert.parse_formats(a.to))
    print(art.dir)


def cmd_import(a: argparse.Namespace) -> None:
    from kit.image import importer

    if a.build not in (None, "docker", "apptainer"):
        raise KitError(f"--build '{a.build}' must be docker or apptainer")
    done = importer.write(a.dockerfile, a.name, a.out, a.base)
    print(f"wrote {done.definition} (from {done.base})")
    for line in done.untranslated:
        print(f"  not translated: {line}")
    if a.build:
        print(f"built: kit run --image {importer.build(done, a.build)} --command ...")


def cmd_pull(a: argparse.Namespace) -> None:
    from kit.image import pull, recipes

    pull.pull(recipes.load(a.image), a.variant, a.ref)


def _interrupt(_sig: int, _frame: object) -> None:
    raise KeyboardInterrupt


def cmd_presets(a: argparse.Namespace) -> None:
    from kit.run import presets

    for name in presets.names():
        p = presets.load(name)
        legs = ", ".join(f"{leg.name} ({leg.image})" for leg in p.legs)
        print(f"{name}  ~{p.minutes} min here  {p.title}")
        print(f"    legs: {legs}; {len(p.published)} published figure(s); baseline {p.baseline}")


PRESET_OWN = {"command", "func", "image", "preset", "full", "out", "dry_run", "resume"}
PRESET_WHERE = {"hosts", "hostfile", "slurm_config"}  # where its legs run: the user's to say


def _run_preset(a: argparse.Namespace) -> None:
    """Each leg a `kit run` of its own, in OUT/LEG; then the preset's report."""
    from kit.report import writers
    from kit.results import store
    from kit.run import presets

    if a.image is not None:
        raise KitError(f"--preset {a.preset} names its own images; drop '{a.image}'")
    kit_parser = parser()
    defaults = vars(kit_parser.parse_args(["run", "IMAGE"]))
    for dest, value in vars(a).items():
        if dest not in PRESET_OWN | PRESET_WHERE and defaults.get(dest) != value:
            flag = "--" + dest.replace("_", "-")
            raise KitError(f"--preset {a.preset} sets the campaign's options; drop {flag}")
    p = presets.load(a.preset)
    across = a.hosts is not None or a.hostfile is not None
    if across and a.full:
        raise KitError(
            "--full runs the study's sizes as Slurm jobs, not over a host list: drop --hosts, "
            "and give --slurm-config a file with tasks_per_node = 1 for one rank a node"
        )
    if across and not any(leg.hosts for leg in p.legs):
        raise KitError(f"preset {p.name} has no leg that runs across nodes; drop --hosts")
    if a.slurm_config is not None and not a.full:
        raise KitError("--slurm-config goes with --full, whose legs are Slurm jobs")
    out = a.out or Path("results") / f"{p.name}-{datetime.now():%Y%m%d-%H%M%S}"
    if a.dry_run:
        store.check_out(out)
        _run_legs(a, p, out, kit_parser)
        return
    with store.held(out):  # legs lock their own folders inside it
        presets.save(p, out, a.full)
        _run_legs(a, p, out, kit_parser)
        path, text = writers.write([out], "md", 0.95, False)
    sys.stdout.write(text if path is None else f"report: {path}\n")


def _where(a: argparse.Namespace, leg: "presets.Leg") -> list[str]:
    """The user's options that say where a leg runs: the host list for a LEG-nodes leg, the
    site file for the study's Slurm legs (--full)."""
    if leg.across:
        return ["--hosts", a.hosts] if a.hosts is not None else ["--hostfile", str(a.hostfile)]
    return ["--slurm-config", str(a.slurm_config)] if a.slurm_config is not None else []


def _run_legs(
    a: argparse.Namespace, p: "presets.Preset", out: Path, kit_parser: argparse.ArgumentParser
) -> None:
    """Each leg as its own `kit run` in OUT/LEG (across the host list too, when given)."""
    from kit.run import presets

    todo = presets.legs(p, a.hosts is not None or a.hostfile is not None)
    for i, leg in enumerate(todo, 1):
        where = _where(a, leg)
        args = presets.argv(p, leg, out, a.full, where=where, dry_run=a.dry_run, resume=a.resume)
        print(f"==> {p.name} {i}/{len(todo)}: kit {' '.join(args)}", file=sys.stderr, flush=True)
        cmd_run(kit_parser.parse_args(args))


def cmd_run(a: argparse.Namespace) -> None:
    from kit.core import paths
    from kit.results import store
    from kit.run import campaign, orphans, plan, request, sbatch

    if a.preset is not None:
        _run_preset(a)
        return
    if a.full:
        raise KitError("--full goes with --preset NAME (the study's own sizes)")
    c = request.check(request.RunRequest.of(a), plan_only=a.dry_run)
    out = a.out or Path("results") / f"{c.recipe.name}-{datetime.now():%Y%m%d-%H%M%S}"
    if a.emit:  # the scripts' folder, not --out, is what the emission writes
        paths.make_dir(a.emit, "--emit", dry_run=a.dry_run)
    if a.dry_run:  # what the run would refuse before its first trial, in its order, now
        if not a.emit:
            store.check_out(out)
            store.check_campaign(out, c.spec, a.resume)
        campaign.preflight(c.recipe, c.runtimes, c.design, c.opts, out, variant=c.variant)
        print(plan.describe(c.design, c.opts))
        return
    if a.emit:
        scripts = sbatch.emit(c.recipe, c.variant, c.runtimes, c.design.trials(), a.emit, c.opts)
        print(
            f"wrote {len(scripts)} sbatch scripts to {a.emit}; submit each with sbatch",
            file=sys.stderr,
        )
        for path in scripts:
            print(path)
        return
    signal.signal(signal.SIGTERM, _interrupt)
    with store.held(out):
        campaign_id, done = store.open_campaign(out, c.spec, a.resume)
        if a.resume:  # its killed run's trials may still run: none beside the first trial
            orphans.end(campaign_id)
        try:
            campaign.execute(
                c.recipe, c.variant, c.runtimes, c.design, out, c.opts, campaign_id, done
            )
        except RunFailed:
            print(out)  # the folder holds the records either way
            raise
    print(out)


def _results_dir(d: Path) -> None:
    """A folder a results command reads must exist: one line naming it, before any work."""
    if not d.is_dir():
        raise KitError(f"results directory '{d}' does not exist; pass a 'kit run --out' DIR")


def cmd_report(a: argparse.Namespace) -> None:
    from kit.report import writers
    from kit.run import request

    if a.format not in writers.FORMATS:
        raise KitError(f"--format '{a.format}' is not one of {', '.join(writers.FORMATS)}")
    request.check_confidence(a.confidence)
    seen: set[Path] = set()
    for d in a.dir:
        _results_dir(d)
        if d.resolve() in seen:
            raise KitError(f"results directory '{d}' is given twice; its trials would count twice")
        seen.add(d.resolve())
    path, text = writers.write(a.dir, a.format, a.confidence, a.allow_mismatch, a.baseline)
    if a.format == "html" and path is not None:
        print(path)
    else:
        sys.stdout.write(text)


def cmd_doctor(a: argparse.Namespace) -> None:
    from kit import doctor, runtimes

    names = [rt.name for rt in runtimes.parse(a.runtime)] if a.runtime else []
    text, ok = doctor.report(names)
    print(text)
    if not ok:
        raise SystemExit(1)


def cmd_cache(a: argparse.Namespace) -> None:
    from kit.image import cache, engine

    if a.cache_command == "ls":
        ids = engine.image_ids()
        print(cache.listing_json(ids) if a.json else cache.listing(ids))
    else:
        print(cache.prune(cache.Rules.of(a.keep_last, a.older_than, a.max_size), a.dry_run))


class Parser(argparse.ArgumentParser):
    """argparse's parser, its mistakes said on one line as kit's own are (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"kit: error: {schema.printable(message)}; see {self.prog} --help\n")


def parser() -> Parser:
    from kit import runtimes

    p = Parser(
        prog="kit",
        description="Build, convert and run distributed deep-learning "
        f"benchmarks natively and in {runtimes.products()}.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"kit {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = (_list, _render, _base, _build, _convert, _pull, _import, _run, _report)
    for add in (*commands, _presets, _doctor, _cache, _catalogued):
        add(sub)
    return p


def _list(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("list", help="images, versions, MPI flavour, frameworks, variants")
    s.add_argument("--json", action="store_true", help="machine-readable (CI matrices)")
    s.set_defaults(func=cmd_list)


def _render(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("render", help="write containers/ from recipes/ (or --check drift)")
    s.add_argument("images", nargs="*", metavar="IMAGE", help="default: every recipe")
    s.add_argument(
        "--check",
        action="store_true",
        help="write nothing; fail if containers/ differs from recipes/",
    )
    s.set_defaults(func=cmd_render)


def _base(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("base", help="make the local Debian base image (debootstrap, as root)")
    s.add_argument("--suite", default="bookworm", help="Debian suite (default: bookworm)")
    s.add_argument("--mirror", help="Debian mirror (default: the host's apt source)")
    s.add_argument("--force", action="store_true", help="remake it even if it exists")
    s.set_defaults(func=cmd_base)


def _build(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("build", help="docker build an image from its rendered recipe")
    s.add_argument("image", metavar="IMAGE")
    s.add_argument("--variant", default="cpu", help="cpu (default) or cuda")
    s.add_argument(
        "--ca-cert",
        type=Path,
        metavar="FILE",
        help="CA bundle for TLS inside the build (default: the host's bundle)",
    )
    s.add_argument("--no-cache", action="store_true", help="ignore the layer cache")
    s.add_argument(
        "--cache-from",
        action="append",
        default=[],
        metavar="IMAGE",
        help="reuse layers of this earlier build (e.g. one loaded from a CI cache); repeatable",
    )
    s.add_argument("--to", metavar="FORMATS", help="then convert, e.g. singularity,shifter")
    s.set_defaults(func=cmd_build)


def _convert(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("convert", help="convert a built image to SIF / Shifter squashfs")
    s.add_argument("image", metavar="IMAGE")
    s.add_argument("--variant", default="cpu")
    s.add_argument(
        "--to",
        required=True,
        metavar="FORMATS",
        help="singularity, shifter (squashfs + metadata + docker-save tar), "
        "charliecloud (same squashfs), docker-archive; comma-separated",
    )
    s.set_defaults(func=cmd_convert)


def _pull(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "pull",
        help="fetch a published image as a SIF (Apptainer, no Docker needed)",
        description="Build IMAGE's SIF with Apptainer from a published reference; "
        "`kit run --runtime singularity` then uses it when there is no local Docker image.",
    )
    s.add_argument("image", metavar="IMAGE")
    s.add_argument(
        "--ref",
        required=True,
        help="registry reference (REGISTRY/OWNER/kit-IMAGE:VERSION-VARIANT) or Apptainer "
        "source URI (docker://…, docker-archive://…, oras://…)",
    )
    s.add_argument("--variant", default="cpu")
    s.set_defaults(func=cmd_pull)


def _import(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "import",
        help="your Dockerfile as an Apptainer definition too (spython), built either way",
        description="Write NAME.def from a Dockerfile with spython's converter, listing what "
        "has no Apptainer equivalent (USER, SHELL, HEALTHCHECK, ...), so a site without "
        "Docker builds the same image; then kit run --image measures it.",
    )
    s.add_argument("dockerfile", type=Path, metavar="DOCKERFILE")
    s.add_argument("--name", required=True, help="the image's name (lower case), e.g. train")
    s.add_argument("--out", type=Path, help="folder for NAME.def (default: the Dockerfile's)")
    s.add_argument(
        "--base",
        metavar="FILE",
        help="bootstrap the definition from this local SIF or docker save archive instead "
        "of pulling the Dockerfile's FROM image from its registry",
    )
    s.add_argument(
        "--build",
        metavar="WITH",
        help="then build it: docker (tag NAME in the local engine) or apptainer (NAME.sif "
        "beside the definition, as the caller)",
    )
    s.set_defaults(func=cmd_import)


def _run(sub: argparse._SubParsersAction) -> None:
    from kit import runtimes
    from kit.core import benches
    from kit.launch import slurm

    s = sub.add_parser(
        "run",
        help="run a benchmark campaign natively and in containers",
        description="Run the image's benchmark under each runtime, trials "
        "interleaved in seeded random order; each trial's record is appended "
        "to OUT/trials.jsonl the moment it ends.",
        epilog="runtimes:\n" + runtimes.described(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "image", metavar="IMAGE", nargs="?", help="a kit image (kit list), or --image / --preset"
    )
    s.add_argument(
        "--preset",
        metavar="NAME",
        help="run a study's experiment (kit presets lists them): each leg a campaign in "
        "OUT/LEG, then the report with the published figures beside the measured ones",
    )
    s.add_argument(
        "--full",
        action="store_true",
        help="with --preset: the study's own sizes (CUDA images, its batch sizes and "
        "rank counts) for a real cluster, instead of the 2-core sizes",
    )
    g = s.add_argument_group("what runs: each list multiplies the campaign")
    g.add_argument(
        "--runtime",
        default="native,docker,singularity,charliecloud",
        help="comma-separated runtimes (listed below); NAME@LABEL adds another arm of a "
        "runtime, e.g. native,native@b for an A/A check (default: %(default)s)",
    )
    g.add_argument(
        "--bench",
        help="comma-separated entry points from the image's list (`kit list`), of "
        f"{', '.join(benches.BENCHES)} (default: the image's first)",
    )
    g.add_argument(
        "--model",
        default="tiny",
        help="comma-separated: tiny, alexnet, resnet50, resnet101, resnet152, inception3 "
        "(default: %(default)s)",
    )
    g.add_argument(
        "--data",
        default="synthetic",
        help="synthetic, real, or synthetic,real for the I/O overhead (default: %(default)s)",
    )
    g.add_argument(
        "--data-dir",
        type=Path,
        help="host folder for the real-data JPEG set, made on first use and bound into "
        "containers (default: ~/.cache/kit/datasets)",
    )
    g.add_argument(
        "--bench-arg",
        action="append",
        default=[],
        metavar="[BENCH:]ARG",
        help="pass ARG to every benchmark, e.g. --bench-arg=--precision=bf16, or to one "
        "only, e.g. --bench-arg=mpi:--time-per-size=0.05 (repeatable)",
    )
    g.add_argument("--batch-size", default="32", help="per-rank batch sizes, e.g. 16,32")
    g.add_argument("--np", default="1", help="rank counts, e.g. 1,2 (>1 uses mpirun)")
    g = s.add_argument_group("your own image and command (instead of IMAGE and kit's benchmarks)")
    g.add_argument(
        "--image",
        dest="foreign_image",
        metavar="REF",
        help="an image kit did not build: docker:NAME[:TAG] (in the local engine), PATH.tar "
        "(docker save; loaded into the engine) or PATH.sif (singularity and charliecloud "
        "only); converted and cached by digest like kit's own",
    )
    g.add_argument(
        "--command",
        metavar="CMD",
        help="what runs in the image, split like a shell line but run without one, e.g. "
        "'python train.py --epochs 1' (the image's entrypoint is bypassed)",
    )
    g.add_argument(
        "--native-command",
        metavar="CMD",
        help="the same workload on this host (your modules or venv), for --runtime native",
    )
    g.add_argument(
        "--metric",
        metavar="REGEX",
        help="the figure the command prints, as one named group whose name names it, e.g. "
        "'throughput: (?P<throughput>[0-9.]+) samples/s'; a trial without a match fails",
    )
    g.add_argument("--unit", default="", help="the figure's unit, e.g. samples/s")
    g.add_argument(
        "--lower-is-better",
        action="store_true",
        help="the figure is a time or a latency (default: higher is better)",
    )
    g.add_argument(
        "--reduce",
        metavar="HOW",
        help="how every matching line (one per rank, or per epoch) makes the trial's figure: "
        "last (the default at one rank), first, sum, mean, median, min, max",
    )
    g.add_argument(
        "--require",
        metavar="REGEX",
        help="a line the output must hold for the trial to count (besides exit status 0)",
    )
    g.add_argument("--name", help="the workload's name in records and headings (default: command)")

    g = s.add_argument_group("how many rounds, and what is compared")
    g.add_argument(
        "--repeats",
        type=int,
        default=8,
        help="measured trials per runtime and configuration (default: 8; "
        "a 95%% interval of a median needs at least 6)",
    )
    g.add_argument(
        "--baseline-launches",
        type=int,
        metavar="N",
        help="launches of native in every round (default: about the square root of the "
        "number of arms compared with it, which narrows every comparison's interval the "
        "most per minute: 2 for four container runtimes; 1 with a single one)",
    )
    g.add_argument(
        "--precision",
        metavar="PCT",
        help="keep adding rounds until every comparison (with native, or as --baseline "
        "says) is known to within ±PCT (e.g. 2%%), or --budget is spent; --repeats is then "
        "the fewest rounds",
    )
    g.add_argument(
        "--budget",
        metavar="TIME",
        help="with --precision: the most wall time to spend, e.g. 30m, 90s, 1h (default 30m)",
    )
    g.add_argument(
        "--baseline",
        metavar="ARM|all",
        help="the arm every other is compared with (default: native), e.g. docker; 'all' "
        "also compares every other pair (e.g. singularity over docker) in one family. "
        "--precision waits for these comparisons, and kit report uses it unless given "
        "its own",
    )
    g.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        help="with --precision: the confidence the whole report's verdicts hold at "
        "(default: %(default)s)",
    )
    g = s.add_argument_group("each trial")
    g.add_argument(
        "--min-time",
        default="0",
        metavar="SECONDS|auto",
        help="each training trial times at least --steps steps and at least this long "
        "(more steps if needed; 0: off, the default). auto: the length that narrows the "
        "intervals most per minute, from the warm-up round's start-up and step times "
        "(longer trials average the steps' noise but not the launch's own offset)",
    )
    g.add_argument(
        "--warmup-trials", type=int, default=1, help="discarded rounds first (default: %(default)s)"
    )
    g.add_argument(
        "--steps", type=int, default=100, help="timed steps per trial (default: %(default)s)"
    )
    g.add_argument("--warmup-steps", type=int, default=5, help="untimed steps per trial")
    g.add_argument("--seed", type=int, default=0, help="seed of the interleaving order")
    g.add_argument("--timeout", type=float, default=600, help="seconds per trial")
    g = s.add_argument_group("how trials are launched")
    g.add_argument("--mpirun", help="host launcher (default: the flavour's, e.g. mpirun.mpich)")
    g.add_argument(
        "--runtime-arg",
        action="append",
        default=[],
        metavar="RUNTIME:ARG",
        help="pass ARG to one runtime arm, e.g. docker:--cpus=1.5 (repeatable)",
    )
    g.add_argument(
        "--launcher",
        default="local",
        help="local: the flavour's mpirun on this host (default); torchrun: PyTorch's own "
        "launcher on this host, all ranks in one container (torch-cnn only, no MPI); slurm: "
        "each trial is a batch job (submitted, then waited for), ranks started by srun "
        "--mpi=pmi2 (MPICH) or mpirun",
    )
    g.add_argument(
        "--hosts",
        metavar="H1,H2",
        help="start the ranks over ssh on these hosts, one rank a host in turn, with the "
        "image flavour's own launcher (MPICH's Hydra -hosts, Open MPI's -H), no scheduler; "
        "each rank in the runtime on its host: native, singularity, singularity-bind, "
        "charliecloud, and podman or docker with MPICH images (each host's own engine, a "
        "container per rank). Checked before the first trial: each host answers ssh without "
        "a prompt, holds the same image conversion, native environment or engine image (its "
        "digest compared) and, for docker, answers from an engine of its own. With "
        "--preset: its legs that say how they run across nodes run a second time over these "
        "hosts, as LEG-nodes",
    )
    g.add_argument(
        "--hostfile",
        type=Path,
        metavar="FILE",
        help="the hosts of --hosts, one a line ('#' comments; a slot count after the name is "
        "ignored)",
    )
    g.add_argument(
        "--slurm-config",
        type=Path,
        metavar="FILE",
        help="site settings for Slurm jobs: a TOML [slurm] table (partition, account, time, "
        "tasks_per_node, options, setup, mpi; and the runtimes' own: "
        + "; ".join(f"{k}: {o.help}" for k, o in slurm.RUNTIME_OPTIONS.items())
        + "); with --preset --full, for every leg",
    )
    g.add_argument(
        "--emit",
        type=Path,
        metavar="DIR",
        help="with --launcher slurm: write each trial's sbatch script to DIR, submit nothing",
    )
    g.add_argument("--variant", default="cpu", help="cpu (default) or cuda")
    g = s.add_argument_group("results")
    g.add_argument("--out", type=Path, help="results directory (default: results/IMAGE-TIME)")
    g.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    g.add_argument(
        "--resume",
        action="store_true",
        help="continue the campaign in --out (same options): run only trials not yet finished",
    )
    s.set_defaults(func=cmd_run)


def _report(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "report",
        help="overhead, scaling and memory tables (and plots) from a results directory",
        description="Summarise a campaign: per runtime median images/s with intervals, the "
        "ratio to the baseline (native unless --baseline) with a verdict and the smallest "
        "difference the campaign could detect, start-up, peak memory, scaling efficiency. "
        "Written to DIR/report.FORMAT; html is one self-contained page with the figures.",
    )
    s.add_argument(
        "dir",
        type=Path,
        nargs="+",
        metavar="DIR",
        help="one or more campaigns' results (e.g. the same matrix via mpirun and via Slurm)",
    )
    s.add_argument("--format", default="md", help="md (default), csv, json or html")
    s.add_argument(
        "--confidence", type=float, default=0.95, help="interval confidence (default: 0.95)"
    )
    s.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="compare runtimes even when their framework or MPI versions differ (marked)",
    )
    s.add_argument(
        "--baseline",
        help="the arm every other is compared with (default: the campaign's kit run "
        "--baseline or a preset's own, else native), "
        "e.g. docker; 'all' "
        "also compares every other pair (e.g. singularity over docker), in one family",
    )
    s.set_defaults(func=cmd_report)


def _presets(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("presets", help="the studies' experiments that kit run --preset runs")
    s.set_defaults(func=cmd_presets)


def _doctor(sub: argparse._SubParsersAction) -> None:
    from kit import runtimes

    s = sub.add_parser(
        "doctor",
        help="what this host has for each runtime, and the fixes",
        epilog="runtimes:\n" + runtimes.described(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("--runtime", help="exit 1 if anything these runtimes need is missing")
    s.set_defaults(func=cmd_doctor)


def _cache(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "cache",
        help="the converted images kit keeps (SIF, squashfs, tar): list them, prune them",
        description="Each image digest kit converted has a folder in the cache (KIT_CACHE) "
        "holding its products; a folder a running campaign or conversion uses is never "
        "removed.",
    )
    s.set_defaults(func=cmd_cache)  # one function a subcommand: it reads cache_command
    cache = s.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    ls = cache.add_parser(
        "ls",
        help="each image folder: products and sizes, last use, whether in use or still in "
        "the engine",
        description="Each image folder, least recently used first (what prune removes "
        "first): its products and their sizes, when a campaign or conversion last used it, "
        "whether a running kit uses it now, and whether the engine still holds the image.",
    )
    ls.add_argument("--json", action="store_true", help="as JSON")
    prune = cache.add_parser(
        "prune",
        help="remove image folders, least recently used first, until the rules hold",
        description="Remove whole image folders, least recently used first, until every "
        "rule given holds; a folder a running kit uses is kept (and said). Prints what it "
        "removed and the space freed.",
    )
    prune.add_argument(
        "--keep-last", type=int, metavar="N", help="at most N folders remain (the most recent)"
    )
    prune.add_argument(
        "--older-than", metavar="AGE", help="remove folders unused for longer, e.g. 30d, 12h"
    )
    prune.add_argument(
        "--max-size", metavar="SIZE", help="at most this much in all, e.g. 20G, 500M, 1.5T"
    )
    prune.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")


# The results catalogue and what reads it across campaigns (kit.results: catalogue,
# compare, gate, history, mllog): kit results, compare, check, history and export.


def _catalogue(a: argparse.Namespace) -> Path:
    from kit.results import catalogue

    path = a.catalogue or catalogue.default_path()
    if path is None:
        raise KitError(f"the catalogue is off ({catalogue.ENV}=off); give --catalogue PATH")
    return path


def cmd_results(a: argparse.Namespace) -> None:
    from kit.results import catalogue, selection

    path = _catalogue(a)
    if a.results_command == "ls":
        with catalogue.opened(path) as db:
            listed = selection.campaigns(db, selection.chosen(vars(a)))
        print(
            json.dumps([vars(c) for c in listed], indent=2) if a.json else selection.table(listed)
        )
        return
    if a.results_command == "add":
        added, old = catalogue.add(path, a.dir), None
    else:
        added, old = catalogue.rebuild(path, a.dir)
    for x in added:
        skipped = f", {len(x.skipped)} unreadable line(s) skipped" if x.skipped else ""
        print(f"{x.folder}: {x.campaigns} campaign(s), {x.new} new trial(s){skipped}")
    print(f"catalogue: {path}" + (f" (the one before kept as {old})" if old else ""))


def cmd_compare(a: argparse.Namespace) -> None:
    from kit.results import catalogue, compare
    from kit.run import request

    request.check_confidence(a.confidence)
    path = a.catalogue or catalogue.default_path()
    sides = [compare.side(x, path) for x in (a.a, a.b)]
    c = compare.compare(*sides, a.confidence, compare.renames(a.as_))
    sys.stdout.write(compare.as_json(c) if a.json else compare.text(c))


def cmd_check(a: argparse.Namespace) -> None:
    from kit.core import units
    from kit.results import catalogue, compare, gate
    from kit.run import request

    request.check_confidence(a.confidence)
    if (a.max_overhead is None) == (a.against is None):
        raise KitError("kit check needs one of --max-overhead ARM=PCT,... or --against SELECTION")
    if (a.against is None) != (a.max_change is None):
        raise KitError("--against SELECTION and --max-change PCT go together")
    _results_dir(a.dir)
    if a.max_overhead is not None:
        checked = gate.overhead(a.dir, gate.bounds(a.max_overhead), a.confidence)
        kind = "overhead"
    else:
        bound = units.percent("--max-change", a.max_change)
        against = compare.side(a.against, a.catalogue or catalogue.default_path())
        checked = gate.change(a.dir, against, bound, a.confidence, compare.renames(a.as_))
        kind = "change"
    sys.stdout.write(gate.text(checked, kind))
    for line in gate.warnings(checked):
        print(f"kit: warning: {line}", file=sys.stderr)
    if gate.failed(checked):
        raise SystemExit(1)


def cmd_history(a: argparse.Namespace) -> None:
    from kit.report import history as drawn
    from kit.results import history, selection
    from kit.run import request

    request.check_confidence(a.confidence)
    sel = selection.chosen(vars(a))
    points = history.points(_catalogue(a), sel, a.confidence)
    if not points:
        raise KitError(
            f"no campaign in the catalogue compares {a.runtime} with native on {a.image} "
            f"({sel.said()}); kit results ls lists them"
        )
    sys.stdout.write(history.text(points))
    title = f"{a.runtime} on {a.image}, over time"
    if a.figure is not None:
        a.figure.write_text(drawn.figure(points, title))
        print(f"figure: {a.figure}")
    if a.html is not None:
        a.html.write_text(drawn.page(points, title))
        print(f"page: {a.html}")


def cmd_export(a: argparse.Namespace) -> None:
    from kit.results import mllog

    if a.format != "mllog":
        raise KitError(f"--format '{a.format}' is not one of mllog")
    _results_dir(a.dir)
    print(mllog.export(a.dir, a.out))


def _catalogue_option(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--catalogue",
        type=Path,
        metavar="PATH",
        help="the results catalogue (default: $KIT_CATALOGUE, else $KIT_CACHE/results.db)",
    )


def _filters(s: argparse.ArgumentParser, image_runtime: bool = True) -> None:
    if image_runtime:
        s.add_argument("--image", help="campaigns of this image (e.g. pytorch-mpich)")
        s.add_argument("--runtime", help="campaigns with this arm, or this runtime's arms")
    s.add_argument("--runtime-version", help="campaigns whose runtime version holds this text")
    s.add_argument("--host", help="campaigns with trials on this host (its hostname)")
    s.add_argument("--since", help="campaigns started at or after this, e.g. 2026-11-01")
    s.add_argument("--until", help="campaigns started before the end of this day or time")
    s.add_argument("--preset", help="campaigns that are legs of this preset")
    s.add_argument("--campaign", help="the campaign with this id (or its first characters)")


def _catalogued(sub: argparse._SubParsersAction) -> None:
    """kit results (add, ls, rebuild), compare, check, history and export."""
    s = sub.add_parser(
        "results",
        help="the results catalogue: every campaign, kept across campaigns and hosts",
        description="Every campaign that ends (or is stopped) is registered in an SQLite "
        "catalogue ($KIT_CACHE/results.db; KIT_CATALOGUE names a site's shared file, or off); "
        "kit compare, check --against and history read it.",
    )
    s.set_defaults(func=cmd_results)
    actions = s.add_subparsers(dest="results_command", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="register existing results folders (again: no-op)")
    add.add_argument("dir", type=Path, nargs="+", metavar="DIR", help="kit run --out folders")
    ls = actions.add_parser("ls", help="the campaigns registered, oldest first, filtered")
    _filters(ls)
    ls.add_argument("--json", action="store_true", help="as JSON")
    rebuild = actions.add_parser(
        "rebuild",
        help="a new catalogue from the folders (the file before is kept, renamed)",
    )
    rebuild.add_argument(
        "dir",
        type=Path,
        nargs="*",
        metavar="DIR",
        help="results folders (default: those the catalogue names)",
    )
    for p in (add, ls, rebuild):
        _catalogue_option(p)

    s = sub.add_parser(
        "compare",
        help="how each runtime's overhead, and native's throughput, changed from A to B",
        description="A and B are results folders or catalogue selections KEY=VALUE[,...] "
        "(keys: image, runtime, runtime-version, host, since, until, preset, campaign), e.g. "
        "kit compare host=nodeA host=nodeB. Each campaign's per-round log ratios are "
        "compared as two samples; the intervals hold together (Bonferroni).",
    )
    s.add_argument("a", metavar="A", help="the before: a results folder or a selection")
    s.add_argument("b", metavar="B", help="the after: a results folder or a selection")
    _compare_options(s)
    s.add_argument("--json", action="store_true", help="as JSON")
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser(
        "check",
        help="a regression gate: exit 1 only when an interval lies wholly beyond the bound",
        description="Exit 1 when an interval lies wholly beyond its bound, 0 when within; "
        "when it straddles the bound: 'cannot tell', a warning, and exit 0.",
    )
    s.add_argument("dir", type=Path, metavar="DIR", help="the campaign checked (kit run --out)")
    s.add_argument(
        "--max-overhead",
        metavar="ARM=PCT,...",
        help="the most overhead each arm may have against native, e.g. docker=5%%,singularity=3%%",
    )
    s.add_argument("--against", metavar="SELECTION", help="a results folder or selection")
    s.add_argument("--max-change", metavar="PCT", help="with --against: the most change, e.g. 3%%")
    _compare_options(s)
    s.set_defaults(func=cmd_check)

    s = sub.add_parser(
        "history",
        help="one runtime's overhead campaign by campaign, with what changed between",
    )
    s.add_argument("image", metavar="IMAGE", help="the image, e.g. pytorch-mpich")
    s.add_argument("--runtime", required=True, help="the runtime (and its NAME@LABEL arms)")
    _filters(s, image_runtime=False)
    s.add_argument("--figure", type=Path, metavar="FILE.svg", help="also draw it as SVG")
    s.add_argument(
        "--html", type=Path, metavar="FILE.html", help="also write it as an HTML page: the "
        "tables and the figure, as kit report draws them"
    )  # fmt: skip
    s.add_argument(
        "--confidence", type=float, default=0.95, help="interval confidence (default: 0.95)"
    )
    _catalogue_option(s)
    s.set_defaults(func=cmd_history)

    s = sub.add_parser("export", help="a campaign's trials in a standard log format")
    s.add_argument("dir", type=Path, metavar="DIR", help="the campaign (kit run --out)")
    s.add_argument("--format", default="mllog", help="mllog (MLPerf :::MLLOG lines; default)")
    s.add_argument("--out", type=Path, metavar="FOLDER", help="default: DIR/mllog")
    s.set_defaults(func=cmd_export)


def _compare_options(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--as",
        dest="as_",
        action="append",
        default=[],
        metavar="ARM=NAME",
        help="count arm ARM as NAME, e.g. docker@cut10=docker (repeatable)",
    )
    s.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        help="the confidence all verdicts hold at together (default: 0.95)",
    )
    _catalogue_option(s)


def commands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser, by name."""
    return next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices


def check_typed(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every string typed for the command on one line (schema.one_line): each may end up
    in a batch script, a file name or a report's markup. (The subcommand is known by its
    function: args.command is run's --command.)"""
    chosen = next(s for s in commands(p).values() if s.get_default("func") is args.func)
    _one_line(chosen, args)


def _one_line(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for action in p._actions:
        value = getattr(args, action.dest, None)
        if isinstance(action, argparse._SubParsersAction):  # kit cache ls: its own options
            if value in action.choices:
                _one_line(action.choices[value], args)
            continue
        name = max(action.option_strings, key=len, default=action.metavar or action.dest)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str | Path):
                schema.one_line(name, str(item))


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    try:
        check_typed(p, args)
        args.func(args)
    except KitError as e:
        print(f"kit: error: {schema.printable(str(e))}", file=sys.stderr)
        return e.status
    except KeyboardInterrupt:
        print("kit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. head, which has stopped reading
        sys.stderr.close()
        return 0
    except OSError as e:  # a file or folder the user named cannot be used
        where = f"'{e.filename}': " if e.filename else ""
        said = schema.printable(f"{where}{e.strerror or e}")
        print(f"kit: error: {said}; check the path and its permissions", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
