"""Checks for the TOML files users write (recipes, Slurm site files), and for the strings
they type on the command line.

A misspelt key must not silently change what is built or submitted, and a value
that lands in a Dockerfile, an Apptainer definition or a batch script must not be
able to smuggle in a line or a command; so every table lists its keys, every
value has a type, and strings are held to the alphabet their use allows. Each
error names the file, the key and what is wrong.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from kit.core.errors import KitError

# What breaks a line or a terminal: C0 and C1 controls, and the Unicode line and paragraph
# separators (Python's splitlines splits at \x85, \u2028 and \u2029 as at \n).
CONTROL = "\x00-\x1f\x7f-\x9f\u2028\u2029"
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")  # image, benchmark and package names
TEXT = re.compile(f"[^{CONTROL}]{{0,500}}")  # one printable line: quoted where rendered
_CONTROL = re.compile(f"[{CONTROL}]")
_SURROGATE = re.compile("[\ud800-\udfff]")  # how Python holds an argument's non-UTF-8 bytes


@dataclass(frozen=True)
class Field:
    kind: type | tuple[type, ...]  # the TOML type; list means a list of `item`
    pattern: re.Pattern | None = None  # for str, and for each str in a list
    item: type = str


def check_table(where: Path | str, table: str, data: object, fields: dict[str, Field]) -> dict:
    """The table as a dict, or a KitError naming the first key that is unknown or wrong."""
    prefix = f"{where}: [{table}]" if table else f"{where}:"
    if not isinstance(data, dict):
        raise KitError(f"{prefix} must be a table, got {type(data).__name__}")
    for key, value in data.items():
        if key not in fields:
            raise KitError(f"{prefix} unknown key {key!r} (known: {', '.join(sorted(fields))})")
        check_value(f"{prefix} {key}", value, fields[key])
    return data


def check_value(what: str, value: object, f: Field) -> None:
    kinds = f.kind if isinstance(f.kind, tuple) else (f.kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise KitError(f"{what}: must be a {_names(kinds)}, got a boolean")
    if not isinstance(value, kinds):
        raise KitError(f"{what}: must be a {_names(kinds)}, got {type(value).__name__}")
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(value, list) and (
            not isinstance(item, f.item) or (isinstance(item, bool) and f.item is not bool)
        ):
            raise KitError(f"{what}: every entry must be a {f.item.__name__}, got {item!r}")
        if isinstance(item, str) and f.pattern and not f.pattern.fullmatch(item):
            raise KitError(f"{what}: {item!r} is not allowed here (must match {f.pattern.pattern})")


def _names(kinds: tuple[type, ...]) -> str:
    return " or ".join("table" if k is dict else k.__name__ for k in kinds)


def printable(text: str) -> str:
    """text with each control character spelt as an escape (a newline as \\n), so what a
    user typed shows on the one line of an error and cannot add one."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


def one_line(what: str, value: str) -> str:
    """value, or a KitError when it holds a control character, or bytes that are not UTF-8:
    a string a user types ends up in a batch script, a file name or a report's markup,
    where a newline adds a line and such bytes cannot be written (a UnicodeEncodeError)."""
    if _CONTROL.search(value):
        raise KitError(
            f"{what} '{printable(value)}' holds a control character (a line break, a tab, "
            "an escape); give it on one line of printable characters"
        )
    if not value.isascii() and _SURROGATE.search(value):  # bytes Python could not decode
        raise KitError(
            f"{what} '{value.encode(errors='backslashreplace').decode()}' is not UTF-8 text "
            "(kit writes it into UTF-8 files: a report, a definition); rename it, or give it "
            "in UTF-8"
        )
    return value


def operand(what: str, value: str, tool: str, fix: str) -> str:
    """value, or a KitError when it starts with '-': kit passes it to tool as an operand
    (a reference, a suite, a URL), where tool would read it as one of its options
    (kit pull --ref=--fakeroot://x reached apptainer build as one)."""
    if value.startswith("-"):
        raise KitError(
            f"{what} '{printable(value)}' starts with '-', which {tool} would read as one of "
            f"its options; {fix}"
        )
    return value
