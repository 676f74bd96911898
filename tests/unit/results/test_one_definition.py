"""One definition a record, every checker of it held to it: the trial record (its type,
kit.results.record.Trial) checked by the runner's Checker and by docs/schemas/trial.json;
the benchmark's record (benchmarks/kitschema.py's declarations) checked by the images'
kitschema.validate and by docs/schemas/bench.json. Each record below, and each of its
mutations, is valid to all of a record's checkers or to none."""

import copy
import json
from pathlib import Path

import kitschema
import pytest
from jsonschema import Draft202012Validator

from kit.results import schemas

from ..core.test_bench_schema import ALLGATHER, GRPC, MPI, TRAIN
from ..records import campaign_folder
from ..records import record as trial_record

DOCS = Path(__file__).parents[3] / "docs" / "schemas"
# what a field may be set to instead: each JSON type, a boolean for a number among them
# (no float with an integer's value: the one place the runner's check is stricter than the
# standard, said in kit.results.schemas and below)
INSTEAD = (True, False, None, "x", 2, 2.5, -1, [], [1], {}, {"a": 1})
OOM = TRAIN | {"status": "oom", "images_per_sec": None, "error": "out of memory"}
BENCH_RECORDS = {"train": TRAIN, "mpi": MPI, "allgather": ALLGATHER, "grpc": GRPC, "oom": OOM}


def mutations(rec: dict) -> list[dict]:
    """rec, then rec with each field left out, and with each field (and each row's field
    of a list of rows) set to each value of INSTEAD."""
    out = [rec]
    for key, value in rec.items():
        out.append({k: v for k, v in rec.items() if k != key})
        out += [rec | {key: other} for other in INSTEAD]
        rows = value if isinstance(value, list) else []
        for i, row in enumerate(r for r in rows if isinstance(r, dict)):
            for field in row:
                for other in (None, "x", True):
                    changed = copy.deepcopy(rec)
                    changed[key][i][field] = other
                    out.append(changed)
    return out


def shipped(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads((DOCS / name).read_text()))


@pytest.mark.parametrize("name", sorted(BENCH_RECORDS))
def test_the_images_validator_and_bench_json_agree_on_every_mutation(name):
    standard = shipped("bench.json")
    for rec in mutations(BENCH_RECORDS[name]):
        assert (kitschema.validate(rec) == []) == standard.is_valid(rec), rec


def test_a_boolean_is_no_number_to_any_checker():
    assert kitschema.validate(TRAIN | {"ranks": True}) == ["ranks: bool, want int"]
    assert kitschema.validate(TRAIN | {"startup_s": False}) == ["startup_s: bool, want float"]
    assert not shipped("bench.json").is_valid(TRAIN | {"ranks": True})
    assert schemas.TRIAL_CHECK(trial_record("native", 5.0, ranks=True))
    assert not shipped("trial.json").is_valid(trial_record("native", 5.0, ranks=True))


def test_the_runners_check_and_trial_json_agree_on_every_mutation():
    standard = shipped("trial.json")
    rec = trial_record("docker", 5.0, wall_s=25.0, steps=100, host_list=["a"])
    for changed in mutations(rec):
        assert (schemas.TRIAL_CHECK(changed) is None) == standard.is_valid(changed), changed


def test_the_one_difference_an_integer_written_as_a_float():
    """JSON Schema takes 2.0 as an integer; kit writes an integer as one, and refuses 2.0
    for a count (a hand edit, another tool's line)."""
    rec = trial_record("docker", 5.0, ranks=2.0)
    assert schemas.TRIAL_CHECK(rec) and shipped("trial.json").is_valid(rec)


def test_every_record_the_tests_make_is_valid_to_the_shipped_schema(tmp_path):
    standard = shipped("trial.json")
    d = campaign_folder(tmp_path / "d", "c1", 3, {"native": 1.0, "docker": 0.9})
    for line in (d / "trials.jsonl").read_text().splitlines():
        rec = json.loads(line)
        assert standard.is_valid(rec) and schemas.TRIAL_CHECK(rec) is None
    for rec in BENCH_RECORDS.values():
        assert shipped("bench.json").is_valid(rec) and kitschema.validate(rec) == []
