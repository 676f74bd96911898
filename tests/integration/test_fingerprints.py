"""Launch fingerprints on real launches: two Docker arms that differ in exactly two known
ways, a CPU quota and OMP_NUM_THREADS, and the report names those and what follows from
them (the thread pools), nothing else."""

import json

import pytest

from .conftest import kit
from .test_pipeline import run_args

pytestmark = pytest.mark.integration


def test_the_report_names_a_cpu_quota_and_a_thread_count_and_nothing_else(built, quiet, tmp_path):
    out = tmp_path / "two-dockers"
    args = run_args("docker,docker@x", out, np="1", repeats="2", steps="10")
    args += ["--baseline", "docker", "--runtime-arg", "docker@x:--cpus=1.5"]
    args += ["--runtime-arg", "docker@x:--env=OMP_NUM_THREADS=1"]
    kit(*args)
    data = json.loads(kit("report", str(out), "--format", "json").stdout)
    (group,) = data["groups"]
    fp = group["fingerprints"]
    assert fp["baseline"] == "docker"
    arms = {a["runtime"]: a for a in fp["arms"]}
    assert arms["docker"]["fingerprinted"] == arms["docker"]["launches"] == 2
    found = {(d["group"], d["fact"]) for d in arms["docker@x"]["differences"]}
    assert ("environment", "OMP_NUM_THREADS") in found
    assert ("limits", "cpu.max") in found
    assert {g for g, _ in found} <= {"environment", "limits", "threads"}, found
    assert {f for g, f in found if g != "threads"} == {"OMP_NUM_THREADS", "cpu.max"}, found
    limit = next(d for d in arms["docker@x"]["differences"] if d["fact"] == "cpu.max")
    assert limit["value"].startswith("150000 ")  # 1.5 cores a period
    text = kit("report", str(out)).stdout  # the Markdown report names them too
    assert "OMP_NUM_THREADS" in text and "cpu.max" in text
