"""The MLLOG lines kit writes (kit export, the benchmarks' mllog_lines), read back by
mlperf-logging's own parser: the format is the package's, not only kit's idea of it."""

import json
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import kitschema
import mllog_lines
import pytest
from mlperf_logging.compliance_checker import mlp_parser
from mlperf_logging.mllog import mllog as reference

from kit import cli
from kit.results import mllog, store
from tests.unit.records import campaign_folder

RULESET = "4.1.0"  # the rules of the pinned mlperf-logging 4.1.x
STEPS = [0.5, 0.25, 0.4]
RESULT = {
    "images_per_sec": 150.0,
    "startup_s": 1.5,
    "step_times_s": STEPS,
    "framework_version": "1.13",
    "mpi_library": "MPICH 4.0.2",
}
BENCH = {  # a kit.bench record as a training benchmark's rank 0 prints it (what write reads)
    "bench": "torch-cnn",
    "model": "tiny",
    "status": "ok",
    "batch_size": 16,
    "ranks": 4,
    "images_per_sec": 321.0,
    "step_times_s": [0.2, 0.1, 0.25],
}


def parsed(path: Path) -> dict[str, list]:
    """The file's events by key, as mlperf-logging's parser reads them, which found no error."""
    loglines, errors = mlp_parser.parse_file(str(path), ruleset=RULESET)
    assert errors == []
    by_key = defaultdict(list)
    for line in loglines:
        by_key[line.key].append(line)
    return by_key


def test_every_exported_file_parses_with_the_values_of_its_record(tmp_path, capsys):
    d = campaign_folder(tmp_path / "c", "c1", 2, {"native": 1.0, "docker": 1.0}, result=RESULT)
    records = [json.loads(x) for x in (d / store.FILE).read_text().splitlines()]
    records[-1] |= {"status": "failed", "result": None}  # a trial that did not end ok
    (d / store.FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "logs"
    assert cli.main(["export", str(d), "--format", "mllog", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [
        f"trial-{r['index']:05d}-{r['runtime']}.log" for r in records
    ]
    for f, r in zip(files, records, strict=True):
        events = parsed(f)
        t0 = datetime.fromisoformat(r["started"]).timestamp() * 1000
        (start,), (stop,) = events["run_start"], events["run_stop"]
        assert [e.value["value"] for e in events["global_batch_size"]] == [64]  # 32 x 2 ranks
        assert start.value["metadata"]["runtime"] == r["runtime"]
        assert stop.timestamp == t0 + 25_000  # its wall_s
        stats = events["tracked_stats"]
        if r["status"] == "ok":
            assert start.timestamp == t0 + 1500  # its startup_s
            assert [s.value["metadata"]["step"] for s in stats] == [1, 2, 3]
            assert [s.value["value"]["throughput"] for s in stats] == [64 / s for s in STEPS]
            assert [s.timestamp - start.timestamp for s in stats] == [500, 750, 1150]
            assert stop.value["metadata"]["status"] == "success"
            assert [e.value["value"] for e in events["throughput"]] == [150.0]
        else:
            assert start.timestamp == t0 and stats == [] and "throughput" not in events
            assert stop.value["metadata"]["status"] == "aborted"


def test_a_corrupted_line_is_a_parse_error(tmp_path):
    d = campaign_folder(tmp_path / "c", "c1", 1, {"native": 1.0}, result=RESULT)
    (f,) = mllog.export(d, tmp_path / "logs").iterdir()
    lines = f.read_text().splitlines()
    i = next(i for i, x in enumerate(lines) if '"tracked_stats"' in x)
    bad = lines[i][:-1]  # its JSON's closing brace cut off
    copy = tmp_path / "corrupted.log"
    copy.write_text("\n".join([*lines[:i], bad, *lines[i + 1 :]]) + "\n")
    loglines, errors = mlp_parser.parse_file(str(copy), ruleset=RULESET)
    assert [line for line, _ in errors] == [bad]
    assert len(loglines) == len(lines) - 1


def test_an_event_is_the_line_mlperf_loggings_own_encoder_writes():
    ours = mllog_lines.event(
        1_800_000_000_123, "POINT_IN_TIME", "tracked_stats", {"throughput": 80.0}, "a.py", step=3
    )
    theirs = reference._encode_log(  # the package's writer, without its call-site lookup
        "",
        1_800_000_000_123,
        "POINT_IN_TIME",
        "tracked_stats",
        {"throughput": 80.0},
        {"file": "a.py", "lineno": 0, "step": 3},
    )
    assert ours == theirs


def test_a_benchmarks_record_becomes_a_run_ending_when_it_is_printed(tmp_path):
    log = tmp_path / "run.log"
    stop = 1_800_000_000_000
    lines = mllog_lines.from_record(BENCH, stop / 1000, "torch_cnn.py", kitschema.IMAGES_PER_SEC)
    log.write_text("\n".join(lines) + "\n")
    events = parsed(log)
    (start,), (end,) = events["run_start"], events["run_stop"]
    assert [e.value["value"] for e in events["global_batch_size"]] == [64]  # 16 x 4 ranks
    assert (start.timestamp, end.timestamp) == (stop - 550, stop)  # the steps' 0.55 s
    stats = events["tracked_stats"]
    assert [s.value["value"]["throughput"] for s in stats] == [320.0, 640.0, 256.0]
    assert [s.timestamp - start.timestamp for s in stats] == [200, 300, 550]
    assert [(e.value["value"], e.value["metadata"]["unit"]) for e in events["throughput"]] == [
        (321.0, "images/s")
    ]
    assert end.value["metadata"]["status"] == "success"
    assert {e.value["metadata"]["file"] for e in (start, end, *stats)} == {"torch_cnn.py"}


def test_write_appends_each_run_to_kit_mllog_and_nothing_elsewhere(tmp_path, monkeypatch, capsys):
    log = tmp_path / "runs.log"
    mllog_lines.write(BENCH)  # KIT_MLLOG unset: no file, no word
    monkeypatch.setenv(mllog_lines.ENV, str(log))
    mllog_lines.write({"bench": "mpi-sweep", "status": "ok", "ranks": 2})  # a sweep's: none
    assert not log.exists() and capsys.readouterr() == ("", "")
    mllog_lines.write(BENCH, kitschema.IMAGES_PER_SEC)
    oom = {**BENCH, "status": "oom", "images_per_sec": None, "step_times_s": []}
    mllog_lines.write(oom, kitschema.IMAGES_PER_SEC)
    assert capsys.readouterr() == ("", "")  # stdout keeps only the record, stderr its words
    events = parsed(log)
    assert len(events["run_start"]) == 2 and len(events["tracked_stats"]) == 3
    assert [e.value["metadata"]["status"] for e in events["run_stop"]] == ["success", "aborted"]
    assert len(events["throughput"]) == 1  # the run that ended ok


def test_a_kit_mllog_that_cannot_be_written_is_said_and_not_fatal(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(mllog_lines.ENV, str(tmp_path))  # a folder: no file to append to
    mllog_lines.write(BENCH)
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"kitbench: KIT_MLLOG={tmp_path}: ")
    assert err.endswith("; no MLLOG lines written\n")


@pytest.mark.parametrize("bad", [0, -0.1, float("inf"), float("nan"), True, "0.2", None])
def test_a_step_time_that_is_no_positive_number_is_left_out_keeping_the_step_numbers(bad):
    lines = mllog_lines.run("k", {}, 8, 0, 1000, [0.5, bad, 0.25], True)
    stats = [json.loads(x.removeprefix(mllog_lines.PREFIX)) for x in lines if "tracked" in x]
    assert [(s["metadata"]["step"], s["time_ms"]) for s in stats] == [(1, 500), (3, 750)]


@pytest.mark.parametrize("bad", ["1.5", [1], None, -2.0])
def test_a_failed_trials_start_up_that_is_no_number_is_exported_without_one(bad, tmp_path):
    """A failed trial's result is as its benchmark printed it (the store checks an ok one's
    fields): a start-up of "1.5" was a ValueError traceback in kit export."""
    d = campaign_folder(tmp_path / "c", "c1", 1, {"native": 1.0})
    line = json.loads((d / store.FILE).read_text())
    line |= {"status": "failed", "cause": "exit 1", "result": {"startup_s": bad}}
    (d / store.FILE).write_text(json.dumps(line) + "\n")
    assert cli.main(["export", str(d)]) == 0
    (path,) = (d / "mllog").iterdir()
    by_key = parsed(path)
    assert by_key["init_stop"][0].timestamp == by_key["init_start"][0].timestamp


def test_seconds_past_any_trials_time_are_exported_as_none(tmp_path):
    """A hand edit's wall_s or step time of 1e308 s overflowed the log's milliseconds (an
    OverflowError traceback in kit export): the wall time is then unknown, and the step
    left out keeping the numbers of the others."""
    d = campaign_folder(tmp_path / "c", "c1", 1, {"native": 1.0})
    line = json.loads((d / store.FILE).read_text())
    line["wall_s"] = 1e308
    line["result"]["step_times_s"] = [0.5, 1e308, 0.25]
    (d / store.FILE).write_text(json.dumps(line) + "\n")
    assert cli.main(["export", str(d)]) == 0
    (path,) = (d / "mllog").iterdir()
    by_key = parsed(path)
    assert [x.value["metadata"]["step"] for x in by_key["tracked_stats"]] == [1, 3]
    assert by_key["run_stop"][0].timestamp == by_key["init_start"][0].timestamp
