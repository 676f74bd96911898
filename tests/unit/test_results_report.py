"""The results store survives a cut-off write; the report summarises rates honestly."""

import copy
import random

import pytest

from kit import report, results
from kit.errors import KitError

BASE = {
    "schema": results.SCHEMA,
    "warmup": False,
    "status": "ok",
    "image": "pytorch-mpich",
    "bench": "torch-cnn",
    "model": "tiny",
    "batch_size": 32,
    "ranks": 2,
    "index": 0,
    "exit_code": 0,
    "runtime_settings": ["--ipc=host"],
    "runtime_version": "x",
    "host": {"cpu_model": "cpu", "cores": 2, "kernel": "6"},
}


def record(runtime, rate, startup=1.0, **kw):
    r = copy.deepcopy(BASE) | {"runtime": runtime} | kw
    r["result"] = {
        "images_per_sec": rate,
        "startup_s": startup,
        "framework_version": "1.13",
        "mpi_library": "MPICH 4.0.2",
    }
    return r


def test_append_load_and_cut_off_line(tmp_path, capsys):
    results.append(tmp_path, {"a": 1})
    results.append(tmp_path, {"a": 2})
    with open(tmp_path / results.FILE, "a") as f:
        f.write('{"a": 3, "cut')
    assert results.load(tmp_path) == [{"a": 1}, {"a": 2}]
    assert "trials.jsonl:3 is not a complete record" in capsys.readouterr().err


def test_report_rows_ratio_and_verdict(tmp_path):
    rng = random.Random(3)
    for _ in range(8):
        results.append(tmp_path, record("native", rng.gauss(1000, 5)))
        results.append(tmp_path, record("docker", rng.gauss(800, 5), startup=2.0))
        results.append(tmp_path, record("singularity", rng.gauss(1000, 5)))
    results.append(tmp_path, record("docker", 1.0, warmup=True))
    results.append(tmp_path, record("docker", 0.0, status="timeout", index=99) | {"result": None})
    text = report.markdown(tmp_path)
    rows = {
        line.split(" | ")[0].strip("| "): line
        for line in text.splitlines()
        if line.startswith("| ") and "runtime" not in line
    }
    assert set(rows) == {"native", "docker", "singularity"}
    assert "| 0.79" in rows["docker"] and "| slower |" in rows["docker"]
    assert "no significant difference" in rows["singularity"]
    assert "1 (reference)" in rows["native"]
    assert "26 trials: 24 ok, 1 not ok, 1 warm-up (discarded)" in text
    assert "#99 docker np=2 tiny bs=32: timeout" in text


def test_report_flags_too_few_trials_and_mismatch(tmp_path):
    for rate in (100, 101, 102):
        results.append(tmp_path, record("native", rate))
        other = record("docker", rate)
        other["result"]["framework_version"] = "2.0"
        results.append(tmp_path, other)
    text = report.markdown(tmp_path)
    assert "too few trials (need 6)" in text
    assert "Software differs between runtimes" in text
    assert "†" in text


def test_report_of_empty_dir_is_a_clear_error(tmp_path):
    with pytest.raises(KitError, match="no trial records"):
        report.markdown(tmp_path)
