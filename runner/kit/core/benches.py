"""The declared benchmarks, as the runner reads them: benchmarks/kitschema.py, the file
the benchmarks in every image validate their records with, loaded from the checkout.

The campaign builds argv from a declaration, the plan checks models against it, the
results reader checks records against it, and the analysis and the report take a
training benchmark's metric and a sweep's series from it.
"""

import importlib.util
import math
import sys
from types import ModuleType

from kit.core.errors import KitError
from kit.core.paths import repo_root


def shared(name: str) -> ModuleType:
    """benchmarks/NAME.py, a file the benchmarks use in their images, loaded from the
    checkout once per process under its own name (the tests import the same file from
    benchmarks/), so runner and benchmarks share one copy of what both need."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, repo_root() / "benchmarks" / f"{name}.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before running it: kitschema's dataclasses look it up
        spec.loader.exec_module(module)
    return sys.modules[name]


_schema = shared("kitschema")
SCHEMA: str = _schema.SCHEMA
DATASET_STAMP: str = _schema.DATASET_STAMP
Bench = _schema.Bench
Metric = _schema.Metric
Series = _schema.Series
BENCHES: dict = _schema.BENCHES
IMAGES_PER_SEC: Metric = _schema.IMAGES_PER_SEC
PHASES: dict = _schema.PHASES  # a launch's phases (phases_s), in the order they run
RECORD_SCHEMA: dict = _schema.json_schema()  # the kit.bench/2 record (docs/schemas/bench.json)
ANALYSED = ("startup_s", "framework_version", "mpi_library")  # read of every training record
# What the analysis reads of an ok record where the record holds it (a user's command's
# and an older benchmark's lack some), so a hand edit is a named line, not a traceback:
# the types it takes (None where it reads none: a run not compiled), and a list's items'
NUMBER = (int, float)
ANALYSED_IF_THERE: dict[str, tuple[tuple[type, ...], tuple[type, ...] | None]] = {
    "startup_s": ((*NUMBER, type(None)), None),
    "compile_s": ((*NUMBER, type(None)), None),
    "compile_isa": ((str, type(None)), None),
    "framework_version": ((str,), None),
    "mpi_library": ((str,), None),
    "step_times_s": ((list, type(None)), NUMBER),
    "peak_rss_mb": ((list, type(None)), NUMBER),
    "loss": ((list,), NUMBER),
    "hosts": ((list, type(None)), None),
}


def get(name: str) -> Bench:
    if name not in BENCHES:
        raise KitError(f"unknown benchmark '{name}' (known: {', '.join(BENCHES)})")
    return BENCHES[name]


def is_sweep(name: str) -> bool:
    """A sweep (no model, batch size or data); an unknown name counts as training."""
    return name in BENCHES and BENCHES[name].sweep


def metric(name: str, result: dict | None = None) -> Metric:
    """The metric a benchmark's runtimes are compared on: its declaration (images/s if it
    declares none), or, for a user's command (kit run --command), the one its result
    carries, named with its unit in every heading."""
    b = BENCHES.get(name)
    if b and b.metric:
        return b.metric
    declared = (result or {}).get("metric")
    if not b and isinstance(declared, dict):
        label = " ".join(str(x) for x in (declared.get("name"), declared.get("unit")) if x)
        return Metric(str(declared.get("key")), label, declared.get("higher_is_better") is True)
    return IMAGES_PER_SEC


def figures(name: str, result: dict) -> list[tuple[str, object]]:
    """The figures a result yields, each with the name a cause calls it by: a training
    benchmark's metric, a user's command's (by its --metric group), or each declared value
    of a sweep's rows."""
    b = BENCHES.get(name)
    if b and b.sweep:
        rows = {s.field: result.get(s.field) for s in b.series}
        return [
            (f"{s.field} {v.key}", row.get(v.key) if isinstance(row, dict) else None)
            for s in b.series
            for row in (rows[s.field] if isinstance(rows[s.field], list) else [])
            for v in s.values
        ]
    m, declared = metric(name, result), result.get("metric")
    label = declared.get("name") if not b and isinstance(declared, dict) else m.key
    return [(str(label), result.get(m.key))]


def figure_problem(name: str, result: dict) -> str:
    """Why a result's figures cannot be compared ("" when they can): each must be a finite
    number above 0, as ratios of them are taken as logs. An oom record has none."""
    if result.get("status") == "oom":
        return ""
    for label, value in figures(name, result):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and value > 0 and (isinstance(value, int) or math.isfinite(value)):
            continue  # an int is finite (a long one fits no float, which isfinite takes)
        shown = f"{value:g}" if isinstance(value, float) else repr(value)[:40]
        shown = "nothing" if value is None else shown
        return f"metric '{label}' read {shown}: a figure must be finite and above 0"
    return ""


def analysed(name: str, result: dict | None = None) -> list[tuple[str, type | tuple]]:
    """The fields of an ok record the analysis reads, with their declared types: a record
    from an older benchmark may lack others and still be reported; a command's result
    holds its figure only."""
    b = BENCHES.get(name)
    if not b and isinstance((result or {}).get("metric"), dict):
        return [(metric(name, result).key, (int, float))]
    # an unknown name is read as a training record, as everywhere
    declared = _schema.fields(name) if b else {**_schema.COMMON, **_schema.TRAIN}
    if b and b.sweep:
        names = [b.version, *(s.field for s in b.series)]
    else:
        names = [metric(name).key, *ANALYSED]
    kinds = {n: declared[n][0] for n in names}
    return [(n, (int, float) if k is float else k) for n, k in kinds.items()]
