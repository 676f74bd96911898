"""The trial record: its key is the analysis key; kit.trial/1 files still read."""

import dataclasses

from kit.analysis import summary
from kit.results import record, store
from kit.results.record import Trial

from ..records import record as make
from ..records import typed


def test_the_analysis_groups_by_exactly_the_records_key_fields():
    keyed = (*record.KEY_FIELDS, *record.DERIVED)
    assert {f.name for f in dataclasses.fields(record.Key)} == set(keyed)
    assert {"variant", "bench_args", "steps", "warmup_steps", "launcher"} <= set(record.KEY_FIELDS)
    assert tuple(record.key_values(Trial.from_json(make("native", 1.0)))) == keyed


def test_a_trial_reads_back_as_filed_and_what_a_record_lacks_as_unknown():
    """kit's own record (every field) reads back to the very dict it was filed as; an
    older kit's lacks fields, which read as None (a list as []), and a newer kit's key
    is left out."""
    filed = Trial.from_json(make("native", 1.0)).to_json()
    assert Trial.from_json(filed).to_json() == filed and len(filed) == len(record.FIELDS)
    old = Trial.from_json({"schema": "kit.trial/1", "campaign": "c", "someday": [1]})
    assert (old.steps, old.host_load, old.bench_args, old.stuck) == (None, None, [], [])
    assert "someday" not in old.to_json()


def test_trials_that_differ_in_steps_are_never_pooled_and_old_files_still_read():
    old = [
        make(rt, 100.0, schema="kit.trial/1", repeat=i)
        for i in range(3)
        for rt in ("native", "docker")
    ]
    new = [
        make(rt, 50.0, repeat=i, steps=3, warmup_steps=1, campaign="c1")
        for i in range(3)
        for rt in ("native", "docker")
    ]
    assert all(store.shape_problem(r) is None for r in old + new)
    assert store.shape_problem(make("native", 1.0, schema="kit.trial/9")).startswith(
        "schema 'kit.trial/9' is not one of kit.trial/1, kit.trial/2"
    )
    groups = summary.summarise(typed(old + new), "").groups
    assert {(g.key.steps, g.arms[0].rate.value) for g in groups} == {(3, 50.0), (None, 100.0)}


def test_a_slurm_node_list_is_counted_compressed_or_not():
    assert [record.node_count(n) for n in ("n1", "n1,n2", "kit-n[1-2]", "n[01-03,7],gpu1")] == [
        1, 2, 2, 5,
    ]  # fmt: skip
