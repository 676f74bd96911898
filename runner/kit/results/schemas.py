"""JSON Schemas (draft 2020-12) made from the record types, and the check of a JSON value
against one: the results store reads every trial line and campaign.json through them, and
docs/schemas/ ships them for other tools, with the benchmark's record's (bench.json, made
from benchmarks/kitschema.py's declarations); `python -m kit.results.schemas docs/schemas`
writes them again; a unit test holds the shipped files to these.

A schema is made from the type hints alone, so a field added to a type is in its schema
and checked on the next read, with nothing else to update. Only what the records use is
known: str, int, float, bool, None, list, dict, list[X], dict[str, X] and unions of those
(each JSON type once). Checker checks the keywords generate writes, which is all kit
needs (`jsonschema` is not one of its dependencies), with one difference from the
standard: an integer must be written as one (5, not 5.0), as kit writes it.
"""

import dataclasses
import json
import sys
import types
import typing
from pathlib import Path

from kit.core import benches
from kit.results.record import SCHEMA, CampaignSpec, Trial

DRAFT = "https://json-schema.org/draft/2020-12/schema"
JSON_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    list: "array",
    dict: "object",
}
WORDS = {  # each JSON type as kit's messages name it (Python's names, as json.loads gives)
    "string": "str",
    "integer": "int",
    "number": "number",
    "boolean": "bool",
    "null": "null",
    "array": "list",
    "object": "dict",
}


def of_type(hint: object) -> dict:
    """The schema of one type hint; a TypeError for one the records do not use."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        parts = [of_type(a) for a in args]
        kinds = [p.pop("type") for p in parts]
        if len(set(kinds)) < len(kinds):
            raise TypeError(f"{hint}: a union of one JSON type twice")
        return {"type": kinds, **{k: v for p in parts for k, v in p.items()}}
    kind = JSON_TYPES.get(origin or hint)
    if kind is None or (origin is dict and args[0] is not str):
        raise TypeError(f"{hint}: no JSON Schema for it here")
    if origin is list:
        return {"type": kind, "items": of_type(args[0])}
    if origin is dict:
        return {"type": kind, "additionalProperties": of_type(args[1])}
    return {"type": kind}


def generate(cls: type, title: str, closed: bool) -> dict:
    """The schema of a record type: each field's type, `enum` where its metadata has one,
    the fields marked `read` required, and with closed no other key allowed."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    schema = {
        "$schema": DRAFT,
        "title": title,
        "description": " ".join((cls.__doc__ or "").split()),
        "type": "object",
        "properties": {
            f.name: of_type(hints[f.name])
            | ({"enum": list(f.metadata["enum"])} if "enum" in f.metadata else {})
            for f in fields
        },
        "required": [f.name for f in fields if f.metadata.get("read")],
    }
    return schema | ({"additionalProperties": False} if closed else {})


# A trial record may hold keys a newer kit added; campaign.json, all of which --resume
# compares, holds only what kit knows.
TRIAL = generate(Trial, f"kit trial record ({SCHEMA})", closed=False)
CAMPAIGN = generate(CampaignSpec, "kit campaign settings (campaign.json)", closed=True)
# docs/schemas/'s files; a trial's result, the benchmark's own record, is declared by
# benchmarks/kitschema.py, whose validate() checks it inside the images
SHIPPED = {"trial.json": TRIAL, "campaign.json": CAMPAIGN, "bench.json": benches.RECORD_SCHEMA}

PYTHON = {kind: (t,) for t, kind in JSON_TYPES.items()} | {"number": (int, float)}


class Checker:
    """The check of a value against a schema (one generate made, or a part of it), built
    once, as a results file may hold 100,000 lines: `check(value)` says why the value
    does not fit, or None. The first misfit is named by its path (field
    'runtime_args.docker[1]'); a required field that is missing or of another type is
    `missing or not a ...`, as kit has always said, and any other field may be missing."""

    def __init__(self, schema: dict) -> None:
        kinds = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
        self.types = tuple(t for k in kinds for t in PYTHON[k])
        self.numbers = not {"integer", "number"}.isdisjoint(kinds) and "boolean" not in kinds
        self.said = " or ".join(WORDS[k] for k in kinds)
        self.enum = schema.get("enum")
        self.items = Checker(schema["items"]) if "items" in schema else None
        self.fields = {k: Checker(part) for k, part in schema.get("properties", {}).items()}
        self.required = schema.get("required", [])
        more = schema.get("additionalProperties", True)
        self.closed = more is False
        self.extra = Checker(more) if isinstance(more, dict) else None

    def fits(self, value: object) -> bool:
        """Of one of the schema's JSON types (True is no number, as json.loads gives it)."""
        return isinstance(value, self.types) and not (self.numbers and isinstance(value, bool))

    def __call__(self, value: object, name: str = "") -> str | None:
        if not self.fits(value):
            return f"field '{name}' is not a {self.said}" if name else f"not a {self.said}"
        if self.enum is not None and value not in self.enum:
            return f"{name or 'the value'} {value!r} is not one of {', '.join(map(str, self.enum))}"
        if self.items is not None and isinstance(value, list):
            for i, item in enumerate(value):
                if why := self.items(item, f"{name}[{i}]"):
                    return why
        if isinstance(value, dict):
            return self._fields_problem(value, f"{name}." if name else "")
        return None

    def _fields_problem(self, value: dict, at: str) -> str | None:
        for key in self.required:
            if key not in value or not self.fields[key].fits(value[key]):
                return f"field '{at}{key}' is missing or not a {self.fields[key].said}"
        for key, check in self.fields.items():
            if key in value and (why := check(value[key], at + key)):
                return why
        if self.closed or self.extra is not None:
            for key in [k for k in value if k not in self.fields]:
                if self.closed:
                    return f"field '{at}{key}' is not one kit knows"
                if why := self.extra(value[key], at + key):
                    return why
        return None


TRIAL_CHECK = Checker(TRIAL)
CAMPAIGN_CHECK = Checker(CAMPAIGN)


def main(argv: list[str]) -> int:
    """Write SHIPPED's files into the folder named (docs/schemas)."""
    if len(argv) != 1:
        print("usage: python -m kit.results.schemas FOLDER", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    for name, schema in SHIPPED.items():
        (folder / name).write_text(json.dumps(schema, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
