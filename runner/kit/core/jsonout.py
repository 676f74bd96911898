"""What `--json` prints: one way to turn kit's values into JSON a script reads, the same
for every command. Each command's output is described by docs/schemas/output/NAME.json."""

import argparse
import dataclasses
import json
import math
from pathlib import Path
from typing import Any


def plain(value: Any) -> Any:
    """value as JSON's types: dataclasses as objects, paths as strings, tuples as arrays,
    and a float that is no number (NaN, an infinity) as null, which strict JSON readers
    (jq, JavaScript) refuse otherwise."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps(value: Any) -> str:
    """value as indented, strict JSON and a line end."""
    return json.dumps(plain(value), indent=2, allow_nan=False) + "\n"


def schema_name(prog: str) -> str:
    """A command's schema's name: `kit cache ls` -> cache-ls."""
    return prog.removeprefix("kit ").replace(" ", "-")


def add_option(s: argparse.ArgumentParser) -> None:
    """--json, one spelling for every command that prints a result, naming its schema."""
    name = schema_name(s.prog)
    s.add_argument("--json", action="store_true", help=f"as JSON (docs/schemas/output/{name}.json)")
