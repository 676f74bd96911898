"""--json on every command that prints a result, one spelling, each output described by
its JSON Schema in docs/schemas/output/ and checked against it here, on real outputs;
every schema kit ships is checked against JSON Schema's 2020-12 metaschema."""

import argparse
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from kit import cli, doctor
from kit.core import jsonout
from kit.image import bundle, convert, engine, normalize, sif, verify
from tests.unit.image.test_cache import make
from tests.unit.records import campaign_folder

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "docs/schemas"
OUTPUT = SCHEMAS / "output"

# the commands whose output is no result a script reads, and why
NO_RESULT = {
    "base": "its result is an image in the engine (kit doctor says whether it is there)",
    "build": "its result is an image in the engine (kit list names its tag)",
    "lock": "its result is recipes/IMAGE.lock.json, a JSON file itself",
    "pull": "its result is a SIF in the cache (kit cache ls --json lists it)",
    "completion": "its result is a bash script",
}


def subcommands(p: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command a user can type, by name: `cache ls`, not `cache`."""
    out = {}
    for name, sub in cli.commands(p).items():
        nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        out |= subcommands(sub, f"{prefix}{name} ") if nested else {f"{prefix}{name}": sub}
    return out


def registry() -> Registry:
    found = [json.loads(p.read_text()) for p in OUTPUT.glob("*.json")]
    return Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in found)


def valid(name: str, text: str) -> object:
    """The output parsed, or the schema's first complaint."""
    value = json.loads(text)
    schema = json.loads((OUTPUT / f"{name}.json").read_text())
    Draft202012Validator(schema, registry=registry()).validate(value)
    return value


@pytest.mark.parametrize("path", sorted(SCHEMAS.rglob("*.json")), ids=lambda p: p.name)
def test_every_schema_kit_ships_is_a_2020_12_schema(path):
    schema = json.loads(path.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


@pytest.fixture
def outputs(tmp_path, monkeypatch, capsys, host_tools) -> dict[str, str]:
    """Each result-printing command run with --json on a synthetic campaign (or, for what
    needs an engine, on stand-ins for it): what it printed, by name."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    for key, days in (("a", 40), ("b", 1)):  # two image folders: prune removes one
        make(tmp_path / "cache", "pytorch-mpich", key, days, sif=0.001)
    d = campaign_folder(tmp_path / "d", "c1", 8, {"native": 1.0, "docker": 0.9}, seed=7)
    d2 = campaign_folder(tmp_path / "d2", "c2", 8, {"native": 1.0, "docker": 0.9}, seed=8)
    db = str(tmp_path / "results.db")
    (tmp_path / "Dockerfile").write_text("FROM debian:12\nRUN true\nUSER nobody\n")
    monkeypatch.setattr(engine, "image_ids", lambda: set())
    monkeypatch.setattr(
        convert, "convert", lambda r, v, f: convert.Artifacts("sha256:ab", tmp_path / "ab")
    )
    monkeypatch.setattr(
        convert, "artifacts", lambda r, v: convert.Artifacts("sha256:ab", tmp_path / "ab")
    )
    same = verify.Verdict("kit/x", "sha256:aa", "REF", "sha256:aa", {}, [])
    monkeypatch.setattr(verify, "compare", lambda image, other: same)
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "base.tar").write_bytes(b"tar")
    held = {"format": bundle.FORMAT, "recipe": "pytorch-mpich", "version": "1.3.0",
            "variant": "cpu", "tag": "kit/pytorch-mpich:1.3.0-cpu", "epoch": 1795824000,
            "digest": "sha256:" + "a" * 64, "dockerfile": "containers/pytorch-mpich/Dockerfile",
            "base": {"tag": "kit/debian:bookworm-aa", "id": "sha256:" + "b" * 64},
            "kit": {"version": "0.1.0", "commit": ""}, "made": "2026-11-28T00:00:00Z",
            "files": {"base.tar": "c" * 64}, "seconds": 1}  # fmt: skip
    monkeypatch.setattr(bundle, "make", lambda r, v, out: held)
    (tmp_path / "built.sif").write_bytes(b"SIF")
    monkeypatch.setattr(normalize, "rewrite", lambda source, out: 1795824000)
    monkeypatch.setattr(sif, "digest", lambda path: "sha256:" + "d" * 64)
    here = doctor.Check("MPICH", True, "4.0", "apt-get install mpich")
    monkeypatch.setattr(doctor, "components", lambda: {"mpich": here})
    monkeypatch.setattr(doctor, "tools", lambda: {"tool:docker": here})
    argv = {
        "list": ["list"],
        "render": ["render", "pytorch-mpich", "--check"],
        "convert": ["convert", "pytorch-mpich", "--to", "singularity"],
        "verify": ["verify", "pytorch-mpich", "--against", "REF"],
        "bundle": ["bundle", "pytorch-mpich", "--out", str(tmp_path / "bundle")],
        "normalize": ["normalize", str(tmp_path / "built.sif"), "--out", str(tmp_path / "o.sif")],
        "import": ["import", str(tmp_path / "Dockerfile"), "--name", "x"],
        "cache ls": ["cache", "ls"],
        "cache prune": ["cache", "prune", "--keep-last", "1", "--dry-run"],
        "run": ["run", "pytorch-mpich", "--runtime", "native,docker", "--repeats", "2",
                "--precision", "2%", "--budget", "20m", "--dry-run"],
        "presets": ["presets"],
        "doctor": ["doctor"],
        "results add": ["results", "add", str(d), "--catalogue", db],
        "results ls": ["results", "ls", "--catalogue", db],
        "results rebuild": ["results", "rebuild", "--catalogue", db],
        "compare": ["compare", str(d), str(d2)],
        "check": ["check", str(d), "--max-overhead", "docker=20%"],
        "history": ["history", "pytorch-mpich", "--runtime", "docker", "--catalogue", db],
        "export": ["export", str(d)],
    }  # fmt: skip
    out = {}
    for name, args in argv.items():
        assert cli.main([*args, "--json"]) == 0, (name, capsys.readouterr().err)
        out[name] = capsys.readouterr().out
    assert cli.main(["report", str(d), "--format", "json"]) == 0
    out["report"] = capsys.readouterr().out
    return out


def test_every_command_that_prints_a_result_has_json_that_its_schema_holds(outputs):
    commands = subcommands(cli.parser())
    assert set(NO_RESULT) <= set(commands)
    for name, p in commands.items():
        if name in NO_RESULT:
            continue
        flags = {f for a in p._actions for f in a.option_strings}
        if name == "report":  # its format is an option of its own; json is one of them
            assert "--json" not in flags
        else:
            assert "--json" in flags, f"kit {name} has no --json"
        assert name in outputs, f"kit {name} --json is not run here"
        valid(jsonout.schema_name(f"kit {name}"), outputs[name])
    assert set(outputs) == set(commands) - set(NO_RESULT)


def test_the_outputs_say_what_the_text_says(outputs):
    plan = json.loads(outputs["run"])
    assert [t["warmup"] for t in plan["trials"]] == [True] * 2 + [False] * 4
    assert plan["target"] == {"precision": 0.02, "budget_s": 1200.0, "confidence": 0.95,
                              "baseline": "native"}  # fmt: skip
    (checked,) = json.loads(outputs["check"])["checked"]
    assert checked["outcome"] == "within" and checked["bound"] == 0.2
    assert json.loads(outputs["doctor"])["missing"] == []
    assert len(json.loads(outputs["export"])["files"]) == 16
    assert len(json.loads(outputs["cache ls"])["folders"]) == 2
    (gone,) = json.loads(outputs["cache prune"])["removed"]  # the least recently used
    assert gone["digest"] == "sha256:" + "a" * 64


def test_json_is_strict_a_number_that_is_none_is_null():
    assert jsonout.dumps({"a": float("nan"), "b": (1, Path("/x"))}) == (
        '{\n  "a": null,\n  "b": [\n    1,\n    "/x"\n  ]\n}\n'
    )


def test_json_without_a_dry_run_is_refused_naming_the_fix(capsys):
    assert cli.main(["run", "pytorch-mpich", "--json"]) == 2
    assert capsys.readouterr().err == (
        "kit: error: --json goes with --dry-run (the plan); a campaign's results as JSON: "
        "kit report DIR --format json\n"
    )
