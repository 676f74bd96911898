"""A user's own command as the benchmark (`kit run --image REF --command ...`): its argv,
and how its figure of merit is read from what it prints.

The figure is a regular expression with one named group: the group's name is the
metric's name in every heading, `--unit` its unit, `--lower-is-better` its direction.
Every line that matches gives a value (one per rank, or one per epoch); `--reduce`
says how they make the trial's figure. A trial whose output has no match, or lacks
a `--require`d line, is failed with its last lines, never a number.
"""

import re
import shlex
import statistics
from dataclasses import dataclass

from kit.core.errors import KitError

SCHEMA = "kit.command/1"  # the result kit files for a command's trial
REDUCTIONS = {
    "last": lambda xs: xs[-1],
    "first": lambda xs: xs[0],
    "sum": sum,
    "mean": statistics.fmean,
    "median": statistics.median,
    "min": min,
    "max": max,
}


@dataclass(frozen=True)
class Command:
    name: str  # the benchmark's name in records and headings
    argv: tuple[str, ...]  # what runs in the image (or on the host, for native)
    native_argv: tuple[str, ...]  # what runs natively (empty: no native arm)
    pattern: str
    unit: str
    higher_is_better: bool
    reduce: str
    require: str = ""

    @property
    def metric(self) -> str:
        """The named group: what the figure is called."""
        return next(iter(re.compile(self.pattern).groupindex))

    def declaration(self) -> dict:
        """What a result carries so the analysis and the report need no registry."""
        return {"key": "value", "name": self.metric, "unit": self.unit,
                "higher_is_better": self.higher_is_better}  # fmt: skip

    def read(self, output: str) -> dict | str:
        """The trial's result from its whole output, or why there is none; the values
        that matched are kept, for the record."""
        found = [m.group(self.metric) for m in re.finditer(self.pattern, output, re.MULTILINE)]
        if bad := next((x for x in found if not _number(x)), None):
            return f"--metric group '{self.metric}' matched '{bad}', not a number"
        if not found:
            return f"no line of the output matched --metric '{self.pattern}'"
        if self.require and not re.search(self.require, output, re.MULTILINE):
            return f"no line of the output matched --require '{self.require}'"
        values = [float(x) for x in found]
        result = {"schema": SCHEMA, "bench": self.name, "metric": self.declaration()}
        return {**result, "value": REDUCTIONS[self.reduce](values), "matches": values}


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def split(flag: str, text: str) -> tuple[str, ...]:
    """A command line as its argument list (POSIX shell quoting, no shell runs it)."""
    try:
        argv = tuple(shlex.split(text))
    except ValueError as e:
        raise KitError(
            f"{flag} '{text}' cannot be split into arguments ({e}); check its quotes"
        ) from None
    if not argv:
        raise KitError(f"{flag} is empty; give the command, e.g. {flag} 'python train.py'")
    return argv


def pattern(text: str) -> str:
    """--metric checked: it compiles and has exactly one named group."""
    try:
        compiled = re.compile(text, re.MULTILINE)
    except re.error as e:
        raise KitError(f"--metric '{text}' is not a regular expression ({e})") from None
    if len(compiled.groupindex) != 1:
        raise KitError(
            f"--metric '{text}' needs exactly one named group for the figure, e.g. "
            "'throughput: (?P<throughput>[0-9.]+) samples/s'"
        )
    return text


def checked_require(text: str) -> str:
    try:
        re.compile(text)
    except re.error as e:
        raise KitError(f"--require '{text}' is not a regular expression ({e})") from None
    return text
