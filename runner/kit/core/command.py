"""A user's own command as the benchmark (`kit run --image REF --command ...`): its argv,
and how its figure of merit is read from what it prints.

The figure is a regular expression with one named group: the group's name is the
metric's name in every heading, `--unit` its unit, `--lower-is-better` its direction.
The output is matched a line at a time as it is printed (it is never held whole: see
kit.launch.streams). Every match gives a value (one per rank, or one per epoch; at most
MAX_MATCHES); `--reduce` says how they make the trial's figure. A trial whose output
has no match, a match that is no finite number, or lacks a `--require`d line, is failed
with its last lines and the cause, never a number.
"""

import math
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
    "mean": statistics.mean,  # exact: fmean's float sum overflows past 1.8e308 (an error)
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

    def reader(self) -> "Figures":
        """A reader for one trial's output."""
        return Figures(self)


MAX_MATCHES = 10_000  # a figure a rank or an epoch: more is a pattern that matches too much


class Figures:
    """A command's figure, read from its output a line at a time (a
    kit.core.readers.Reader); the values that matched are kept, for the record."""

    def __init__(self, cmd: Command) -> None:
        self.cmd, self.group = cmd, cmd.metric
        self.pattern = re.compile(cmd.pattern)
        self.require = re.compile(cmd.require) if cmd.require else None
        self.required = self.require is None
        self.values: list[float] = []
        self.idle = False  # a match whose group took no part (an optional one)
        self.why = ""  # a match that gives no figure: the trial has none

    def line(self, text: str) -> None:
        if not self.required and self.require.search(text):
            self.required = True
        if self.why:
            return
        for m in self.pattern.finditer(text):
            found = m.group(self.group)
            if found is None:
                self.idle = True
                continue
            value = _number(found)
            if value is None:
                self.why = f"--metric group '{self.group}' matched '{found}', not a finite number"
                return
            if len(self.values) == MAX_MATCHES:
                self.why = (
                    f"--metric '{self.cmd.pattern}' matched more than {MAX_MATCHES} times; "
                    "match only the lines that give the figure (one a rank, or an epoch)"
                )
                return
            self.values.append(value)

    def result(self) -> dict | str:
        """The trial's result, or why there is none."""
        if self.why:
            return self.why
        if not self.values:
            if self.idle:
                return (
                    f"--metric '{self.cmd.pattern}' matched, but its group '{self.group}' "
                    "took no part: no figure"
                )
            return f"no line of the output matched --metric '{self.cmd.pattern}'"
        if not self.required:
            return f"no line of the output matched --require '{self.cmd.require}'"
        ran = {"argv": list(self.cmd.argv), "native_argv": list(self.cmd.native_argv)}
        result = {
            "schema": SCHEMA,
            "bench": self.cmd.name,
            "metric": self.cmd.declaration(),
            "command": ran,  # what printed it: another command is another configuration
        }
        value = REDUCTIONS[self.cmd.reduce](self.values)
        return {**result, "value": value, "matches": self.values}


def _number(text: str) -> float | None:
    """The finite number text spells (float() also reads nan, inf and 1e999), or None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


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
