"""kit report, and the results catalogue and what reads it across campaigns (kit.results:
catalogue, compare, gate, history, mllog): kit results, compare, check, history and
export, each its parser and what it calls."""

import argparse
import sys
from pathlib import Path

from kit.core import jsonout
from kit.core.errors import EXIT_FAILED, KitError
from kit.core.log import logger

log = logger(__name__)


# what --format takes, listed in --help: the report's are kit.report.writers.FORMATS (a
# test holds the two equal; importing the writers here would slow every command's start)
REPORT_FORMATS = ("md", "csv", "json", "html")
EXPORT_FORMATS = ("mllog",)


def _choices(values: tuple[str, ...]) -> str:
    return "{" + ",".join(values) + "}"


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


def _catalogue(a: argparse.Namespace) -> Path:
    from kit.results import catalogue

    path = a.catalogue or catalogue.default_path()
    if path is None:
        raise KitError(f"the catalogue is off ({catalogue.ENV}=off); give --catalogue PATH")
    return path


def cmd_results(a: argparse.Namespace) -> None:
    from kit.across import history
    from kit.results import catalogue, selection

    path = _catalogue(a)
    if a.results_command == "ls":
        with catalogue.opened(path) as db:
            listed = selection.campaigns(db, selection.chosen(vars(a)))
        if a.json:
            sys.stdout.write(jsonout.dumps([vars(c) for c in listed]))
        else:
            print(selection.table(listed))
        return
    if a.results_command == "add":
        added, old = catalogue.add(path, a.dir), None
    else:
        added, old = catalogue.rebuild(path, a.dir)
    history.warm(path)  # what kit history reads, computed once
    if a.json:
        sys.stdout.write(jsonout.dumps({"catalogue": path, "kept": old, "added": added}))
        return
    for x in added:
        skipped = f", {len(x.skipped)} unreadable line(s) skipped" if x.skipped else ""
        print(f"{x.folder}: {x.campaigns} campaign(s), {x.new} new trial(s){skipped}")
    print(f"catalogue: {path}" + (f" (the one before kept as {old})" if old else ""))


def cmd_compare(a: argparse.Namespace) -> None:
    from kit.across import compare
    from kit.results import catalogue
    from kit.run import request

    request.check_confidence(a.confidence)
    path = a.catalogue or catalogue.default_path()
    sides = [compare.side(x, path) for x in (a.a, a.b)]
    c = compare.compare(*sides, a.confidence, compare.renames(a.as_))
    sys.stdout.write(jsonout.dumps(c) if a.json else compare.text(c))


def cmd_check(a: argparse.Namespace) -> None:
    from kit.across import compare, gate
    from kit.core import units
    from kit.results import catalogue
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
    code = gate.exit_code(checked)
    if a.json:
        said = {"kind": kind, "confidence": a.confidence, "checked": checked}
        sys.stdout.write(jsonout.dumps(said | {"failed": code == EXIT_FAILED}))
    else:
        sys.stdout.write(gate.text(checked, kind))
    for line in gate.warnings(checked):
        log.warning(f"kit: warning: {line}")
    if code:
        raise SystemExit(code)


def cmd_history(a: argparse.Namespace) -> None:
    from kit.across import history
    from kit.core import paths
    from kit.report import history as drawn
    from kit.results import selection
    from kit.run import request

    request.check_confidence(a.confidence)
    for flag, path, suffix in (("--figure", a.figure, ".svg"), ("--html", a.html, ".html")):
        if path is not None and path.suffix.lower() not in (suffix, ""):
            raise KitError(
                f"{flag} '{path}': kit history writes {suffix[1:].upper()}, not what "
                f"'{path.suffix}' names; give a FILE{suffix}"
            )
    sel = selection.chosen(vars(a))
    points = history.points(_catalogue(a), sel, a.confidence)
    if not points:
        raise KitError(
            f"no campaign in the catalogue compares {a.runtime} with native on {a.image} "
            f"({sel.said()}); kit results ls lists them"
        )
    sys.stdout.write(jsonout.dumps(points) if a.json else history.text(points))
    title = f"{a.runtime} on {a.image}, over time"
    said = sys.stderr if a.json else sys.stdout  # --json: stdout holds the JSON alone
    if a.figure is not None:
        paths.write_output("--figure", a.figure, drawn.figure(points, title))
        print(f"figure: {a.figure}", file=said)
    if a.html is not None:
        paths.write_output("--html", a.html, drawn.page(points, title))
        print(f"page: {a.html}", file=said)


def cmd_export(a: argparse.Namespace) -> None:
    from kit.results import mllog

    if a.format not in EXPORT_FORMATS:
        raise KitError(f"--format '{a.format}' is not one of {', '.join(EXPORT_FORMATS)}")
    _results_dir(a.dir)
    folder = mllog.export(a.dir, a.out)
    if a.json:
        logs = sorted(p.name for p in folder.glob("trial-*.log"))
        sys.stdout.write(jsonout.dumps({"format": a.format, "folder": folder, "files": logs}))
    else:
        print(folder)


def add_report(sub: argparse._SubParsersAction) -> None:
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
    s.add_argument(
        "--format",
        default="md",
        metavar=_choices(REPORT_FORMATS),
        help="the report's format (default: md)",
    )
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


def add_catalogued(sub: argparse._SubParsersAction) -> None:
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
        jsonout.add_option(p)

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
    jsonout.add_option(s)
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser(
        "check",
        help="a regression gate: exit 1 only when an interval lies wholly beyond the bound",
        description="Exit 0 when every interval lies within its bound, 1 when one lies "
        "wholly beyond it, 2 on a mistake in what was asked, 3 when one cannot tell (it "
        "straddles the bound, or too few rounds): never a pass.",
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
    jsonout.add_option(s)
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
    jsonout.add_option(s)
    s.set_defaults(func=cmd_history)

    s = sub.add_parser("export", help="a campaign's trials in a standard log format")
    s.add_argument("dir", type=Path, metavar="DIR", help="the campaign (kit run --out)")
    s.add_argument(
        "--format",
        default="mllog",
        metavar=_choices(EXPORT_FORMATS),
        help="mllog: MLPerf :::MLLOG lines (default)",
    )
    s.add_argument("--out", type=Path, metavar="FOLDER", help="default: DIR/mllog")
    jsonout.add_option(s)
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
