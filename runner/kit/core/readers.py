"""How a trial's result is read from what it prints: a line at a time, as it is printed
(never held whole), then the result or why there is none.

The kit benchmark's record is read by BenchRecord, a user's command's figure by
kit.core.command's Figures. Both sit here, below the runtimes (a Job names its reader)
and the launch (which hands the reader each line), so neither looks up for the other.
"""

import json
from typing import Protocol

from kit.core import benches


class Reader(Protocol):
    """How a trial's result is read: its standard output a line at a time, as it is printed
    (never held whole), then the result, or why there is none (a str; None: no word)."""

    def line(self, text: str) -> None: ...

    def result(self) -> dict | str | None: ...


class BenchRecord:
    """The kit benchmark's record: the last stdout line that is a kit.bench JSON object."""

    def __init__(self) -> None:
        self.record: dict | None = None

    def line(self, text: str) -> None:
        text = text.strip()
        if not text.startswith("{"):
            return
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, an int too long, nested too deep
            return
        if isinstance(record, dict) and record.get("schema") == benches.SCHEMA:
            self.record = record

    def result(self) -> dict | None:
        return self.record


def parse_result(stdout: str) -> dict | None:
    """The benchmark's record in an output held whole (a test's, a command's)."""
    reader = BenchRecord()
    for line in stdout.splitlines():
        reader.line(line)
    return reader.result()


def read_result(reader: Reader) -> tuple[dict | None, str]:
    """The result the reader found, or None and why: the reader's own words, or the
    figure in it that is not finite and above 0 (benches.figure_problem)."""
    got = reader.result()
    if isinstance(got, str):
        return None, got
    if got is not None and (why := benches.figure_problem(str(got.get("bench")), got)):
        return None, why
    return got, ""
