"""The JSON Schemas made from the record types: what the generator writes, what the check
catches, the files docs/schemas/ ships, and campaign.json checked where kit reads it."""

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kit import cli
from kit.core.errors import KitError
from kit.results import record, schemas, store
from kit.run import request

from ..records import campaign_folder, typed
from ..records import record as make

DOCS = Path(__file__).parents[3] / "docs" / "schemas"


@dataclass
class Toy:
    """A toy record."""

    name: str = field(metadata={"read": True, "enum": ("a", "b")})
    count: int = field(metadata={"read": True})
    tags: list[str] | None = None
    rate: float | None = None
    on: bool = False
    extra: dict = field(default_factory=dict)
    args: dict[str, list[int]] = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)


def test_a_toy_dataclass_gives_exactly_this_schema():
    assert schemas.generate(Toy, "toy", closed=True) == {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "toy",
        "description": "A toy record.",
        "type": "object",
        "properties": {
            "name": {"type": "string", "enum": ["a", "b"]},
            "count": {"type": "integer"},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
            "rate": {"type": ["number", "null"]},
            "on": {"type": "boolean"},
            "extra": {"type": "object"},
            "args": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "integer"}},
            },
            "rows": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["name", "count"],
        "additionalProperties": False,
    }
    assert "additionalProperties" not in schemas.generate(Toy, "toy", closed=False)


@pytest.mark.parametrize("hint", [list[str] | list[int], dict[int, str], tuple[str], set])
def test_a_type_with_no_schema_here_is_refused(hint):
    with pytest.raises(TypeError):
        schemas.of_type(hint)


TOY = schemas.Checker(schemas.generate(Toy, "toy", closed=True))
GOOD = {"name": "a", "count": 3, "tags": None, "rate": 2, "args": {"x": [1, 2]}}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({}, None),
        ({"count": 3.0}, "field 'count' is missing or not a int"),
        ({"count": True}, "field 'count' is missing or not a int"),
        ({"count": None}, "field 'count' is missing or not a int"),
        ({"name": "c"}, "name 'c' is not one of a, b"),
        ({"rate": "2%"}, "field 'rate' is not a number or null"),
        ({"rate": False}, "field 'rate' is not a number or null"),
        ({"on": 1}, "field 'on' is not a bool"),
        ({"tags": ["x", 7]}, "field 'tags[1]' is not a str"),
        ({"args": {"x": [1, "2"]}}, "field 'args.x[1]' is not a int"),
        ({"args": {"x": 1}}, "field 'args.x' is not a list"),
        ({"rows": [{}, []]}, "field 'rows[1]' is not a dict"),
        ({"more": 1}, "field 'more' is not one kit knows"),
    ],
)
def test_the_check_names_the_first_misfit_by_its_path(change, why):
    assert TOY(GOOD | change) == why


def test_a_missing_required_field_is_named_and_an_optional_one_may_be_missing():
    assert TOY({"name": "a"}) == "field 'count' is missing or not a int"
    assert TOY({"name": "a", "count": 0}) is None
    assert TOY([GOOD]) == "not a dict"


def test_the_shipped_schemas_are_the_ones_the_types_make(tmp_path):
    """docs/schemas/ is what `python -m kit.results.schemas docs/schemas` writes now: a
    field added to a type without writing them again fails here."""
    assert schemas.main([str(tmp_path)]) == 0
    for name in schemas.SHIPPED:
        assert (DOCS / name).read_text() == (tmp_path / name).read_text(), name
    assert sorted(p.name for p in DOCS.glob("*.json")) == sorted(schemas.SHIPPED)


def test_the_trial_schema_requires_the_fields_marked_read_with_their_types():
    """The store checks each line against the record type's `read` fields, with the
    JSON type each must have (no second list of them to drift)."""
    properties = schemas.TRIAL["properties"]
    assert {name: properties[name]["type"] for name in schemas.TRIAL["required"]} == {
        "schema": "string", "campaign": "string", "index": "integer", "warmup": "boolean",
        "image": "string", "bench": "string", "model": "string", "batch_size": "integer",
        "ranks": "integer", "runtime": "string", "runtime_version": "string",
        "runtime_settings": "array", "host": "object", "status": "string",
    }  # fmt: skip
    assert properties["schema"]["enum"] == list(record.READABLE)
    assert "additionalProperties" not in schemas.TRIAL  # a newer kit's fields still read


def test_each_line_of_a_trials_file_is_read_through_the_trial_schema(tmp_path):
    """A line that does not fit is named by file, line and field; an older kit's record
    (kit.trial/1, without the fields added since) and a newer one's extra keys still read,
    as does a wall time filed as null."""
    path = tmp_path / store.FILE
    old = make("native", 5.0, schema="kit.trial/1")
    newer = make("native", 5.0, index=1, wall_s=None) | {"someday": {"x": [1]}}
    lines = [old, make("native", 5.0, index=2, host_list=["a", 1]), newer]
    lines += [make("native", 5.0, index=3, exit_code="0"), make("native", 5.0, index=True)]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    got = store.read(path)
    assert got.records == typed([old, newer])
    first, second = got.records
    assert (first.steps, first.host_list, second.wall_s) == (None, [], None)  # unknown, none
    assert "someday" not in second.to_json()  # a newer kit's key: nothing here reads it
    assert got.problems == [
        f"{path}:2: field 'host_list[1]' is not a str",
        f"{path}:4: field 'exit_code' is not a int or null",
        f"{path}:5: field 'index' is missing or not a int",
    ]


def campaigns(tmp_path: Path) -> list[dict]:
    """The settings kit run saves for kit's image (with every optional part it has) and
    for a user's own image."""
    sif = tmp_path / "train.sif"
    sif.write_bytes(b"#!/usr/bin/env run-singularity\n\x00SIF_MAGIC" + b"\x00" * 64)
    kit_image = ["pytorch-mpich", "--runtime", "native,docker", "--precision", "2%",
                 "--baseline", "all", "--data", "real", "--data-dir", str(tmp_path / "data"),
                 "--runtime-arg", "docker:--cpus=1"]  # fmt: skip
    own = ["--image", str(sif), "--command", "/loop 10", "--metric", "rate: (?P<rate>[0-9.]+)",
           "--runtime", "singularity,charliecloud"]  # fmt: skip
    specs = []
    for argv in (kit_image, own):
        a = cli.parser().parse_args(["run", *argv, "--dry-run"])
        q = request.RunRequest.of(a)
        specs.append(request.prepare(q, request.check(q), plan_only=True).spec)
    return specs


@pytest.mark.usefixtures("host_tools")
def test_every_setting_kit_run_saves_has_its_typed_field(tmp_path):
    """Each kind of campaign is saved as a CampaignSpec (one of its settings without a
    field would be refused) and resumes with the same settings; the precision target is
    a number."""
    for n, spec in enumerate(campaigns(tmp_path)):
        out = tmp_path / f"c{n}"
        cid, _ = store.open_campaign(out, spec, resume=False)
        saved = json.loads((out / store.SPEC_FILE).read_text())
        as_json = json.loads(json.dumps(spec))
        assert saved == {"campaign": cid, **{k: v for k, v in as_json.items() if v is not None}}
        assert store.check_campaign(out, spec, resume=True) == record.CampaignSpec(**saved)
    assert store.settings(tmp_path / "c0")["precision"] == 0.02
    with pytest.raises(ValueError, match="field 'precison' is not one kit knows"):
        store.open_campaign(tmp_path / "typo", {"precison": 0.02}, resume=False)


@pytest.mark.usefixtures("host_tools")
def test_a_mistyped_campaign_json_is_one_line_for_resume_and_report(tmp_path, capsys):
    out = campaign_folder(tmp_path / "c", "c1", rounds=6, factors={"native": 1, "docker": 1})
    path = out / store.SPEC_FILE
    path.write_text(json.dumps({"campaign": "c1", "runtimes": ["native"], "precision": "2%"}))
    said = (
        f"kit: error: {path}: field 'precision' is not a number or null; correct it as "
        "docs/schemas/campaign.json says, or start a new campaign with another --out\n"
    )
    for argv in (["report", str(out)], ["run", "pytorch-mpich", "--runtime", "native",
                                         "--out", str(out), "--resume", "--dry-run"]):  # fmt: skip
        assert cli.main(argv) == 2, argv
        assert capsys.readouterr().err == said, argv
    path.write_text(json.dumps({"campaign": "c1", "precision": 0.02, "runtime_arg": {}}))
    with pytest.raises(KitError, match=r"campaign.json: field 'runtime_arg' is not one kit"):
        store.settings(out)
