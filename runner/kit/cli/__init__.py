"""The `kit` command line: one subcommand per pipeline stage. It only parses and
dispatches: the image stage's commands are in images, the results' in results, and
kit run's options are declared once in kit.run.options."""

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn, TextIO

from kit import __version__
from kit.cli import completion, images, results
from kit.core import columns, jsonout, log, schema
from kit.core.errors import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    KitError,
)

messages = log.logger(__name__)

NEGATIVE = re.compile(r"^-[0-9.]+[A-Za-z%]*$")  # a negative size, duration or percentage
EPILOG = """pipeline: recipes/*.toml --render--> containers/ --build--> Docker image
  --convert--> SIF / Shifter squashfs --run--> trials.jsonl --report--> overhead table

exit codes (every command):
""" + "\n".join(columns.aligned([(str(c), said) for c, said in EXIT_CODES.items()], "  ", {0}))


def cmd_run(a: argparse.Namespace) -> None:
    from kit.run import preset_run, request, start
    from kit.run.checks import RunRequest

    q = RunRequest.of(a)
    if q.json and not q.dry_run:
        raise KitError(
            "--json goes with --dry-run (the plan); a campaign's results as JSON: "
            "kit report DIR --format json"
        )
    if q.preset is None:
        start.run(q, request.check(q))
    else:
        preset_run.run(q, _preset_report)


def _preset_report(out: Path) -> None:
    """A preset's report, filed in its folder (else printed), once its legs have run."""
    from kit.report import writers

    path, text = writers.write([out], "md", 0.95, False)
    sys.stdout.write(text if path is None else f"report: {path}\n")


def cmd_presets(a: argparse.Namespace) -> None:
    from kit.run import presets

    if a.json:
        listed = [presets.load(name) for name in presets.names()]
        sys.stdout.write(jsonout.dumps(listed))
        return
    for name in presets.names():
        p = presets.load(name)
        legs = ", ".join(f"{leg.name} ({leg.image})" for leg in p.legs)
        print(f"{name}  ~{p.minutes} min here  {p.title}")
        print(f"    legs: {legs}; {len(p.published)} published figure(s); baseline {p.baseline}")


def cmd_doctor(a: argparse.Namespace) -> None:
    from kit import doctor, runtimes

    names = [rt.name for rt in runtimes.parse(a.runtime)] if a.runtime else []
    found = doctor.examine(names)
    sys.stdout.write(jsonout.dumps(found) if a.json else doctor.text(found, names) + "\n")
    if not found.ok:
        raise SystemExit(EXIT_FAILED)


class Parser(argparse.ArgumentParser):
    """argparse's parser, its mistakes said on one line as kit's own are (exit 2). A
    value such as -5%, -1G or -5d is a value (argparse took it for an option, "expected
    one argument", the value never named): the option's own check names it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"kit: error: {schema.printable(message)}; see {self.prog} --help\n")


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
    _loudness(p, False)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        *(images.add_list, images.add_render, images.add_base, images.add_build),
        *(images.add_lock, images.add_bundle, images.add_verify),
        *(images.add_convert, images.add_normalize, images.add_pull, images.add_import),
        *(_run, results.add_report),
        *(_presets, _doctor, images.add_cache, results.add_catalogued, _completion),
    ):
        add(sub)
    for leaf in completion.leaves(p):
        _loudness(leaf, argparse.SUPPRESS)
    return p


def _loudness(p: argparse.ArgumentParser, default: object) -> None:
    """-q/--quiet and -v/--verbose, before the command or after it (a command's copies
    default to SUPPRESS: argparse would otherwise reset what was given before it)."""
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default,
        help="say only warnings and errors on stderr",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=default,
        help="also say every command kit runs (default: KIT_LOG_LEVEL, else info)",
    )


def _run(sub: argparse._SubParsersAction) -> None:
    from kit import runtimes
    from kit.run import options

    s = sub.add_parser(
        "run",
        help="run a benchmark campaign natively and in containers",
        description="Run the image's benchmark under each runtime, trials "
        "interleaved in seeded random order; each trial's record is appended "
        "to OUT/trials.jsonl the moment it ends.",
        epilog="runtimes:\n" + runtimes.described(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options.add_to(s)
    s.set_defaults(func=cmd_run)


def _presets(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("presets", help="the studies' experiments that kit run --preset runs")
    jsonout.add_option(s)
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
    jsonout.add_option(s)
    s.set_defaults(func=cmd_doctor)


def cmd_completion(a: argparse.Namespace) -> None:
    sys.stdout.write(completion.bash(parser()))


def _completion(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "completion",
        help="the shell's completion of kit's commands and options",
        description="Print bash's completion of kit, generated from kit's own parser: "
        "source <(kit completion bash), or save it as "
        "~/.local/share/bash-completion/completions/kit.",
    )
    s.add_argument("shell", choices=["bash"], help="the shell (bash)")
    s.set_defaults(func=cmd_completion)


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


class _Output:
    """Standard output whose write errors name it: a redirect to a full disk (or /dev/full)
    otherwise read as "No space left on device" of no file, or went unsaid when Python's
    last flush at exit failed."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)

    def write(self, text: str) -> int:
        with self._named():
            return self._stream.write(text)

    def flush(self) -> None:
        with self._named():
            self._stream.flush()

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        try:
            yield
        except BrokenPipeError:
            raise
        except OSError as e:
            # what is still buffered goes nowhere: Python's own flush at exit would fail again
            with contextlib.suppress(OSError, ValueError):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, self._stream.fileno())
                os.close(null)
            raise KitError(
                f"could not write kit's output to standard output ({e.strerror or e}); free "
                "space where it goes or send it elsewhere"
            ) from e


def main(argv: list[str] | None = None) -> int:
    stdout, sys.stdout = sys.stdout, _Output(sys.stdout)
    try:
        try:
            return _main(argv)
        except SystemExit:  # argparse's --help, --version and usage errors
            sys.stdout.flush()
            raise
    except KitError as e:  # the output could not be written
        messages.error(f"kit: error: {schema.printable(str(e))}")
        return e.status
    finally:
        sys.stdout = stdout


def _main(argv: list[str] | None) -> int:
    p = parser()
    args = p.parse_args(argv)
    try:
        log.set_level(log.level(args.quiet, args.verbose))
        check_typed(p, args)
        args.func(args)
        sys.stdout.flush()
    except KitError as e:
        messages.error(f"kit: error: {schema.printable(str(e))}")
        return e.status
    except KeyboardInterrupt:
        messages.error("kit: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into e.g. head, which has stopped reading
        sys.stderr.close()
        return EXIT_OK
    except OSError as e:  # a file or folder the user named cannot be used
        where = f"'{e.filename}': " if e.filename else ""
        what = schema.printable(f"{where}{e.strerror or e}")
        messages.error(f"kit: error: {what}; check the path and its permissions")
        return EXIT_USAGE
    return EXIT_OK
