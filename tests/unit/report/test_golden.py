"""Reports of fixed campaigns, as golden files (BenchExec's way with its tables): the
shipped contaminated A/A + cut campaign, rendered as Markdown, CSV, JSON and HTML; an MPI
sweep campaign; and a preset's folder, whose report holds its published figures (figures
left out of the HTML's golden copies: they are SVG from matplotlib, checked elsewhere).
A change to what a report says shows up here as a diff to read; KIT_GOLDEN=write
rewrites the files after such a change was meant."""

import os
import random
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from kit.analysis import summary
from kit.report import writers
from kit.results import store
from kit.run import presets

from ..records import BASE, record, typed
from ..results.test_coverage import shipped

GOLDEN = Path(__file__).parent / "golden"
T0 = datetime.fromisoformat("2026-11-01T10:00:00+00:00")
HOST = {**BASE["host"], "hostname": "nodeA"}


def without_figures(text: str, fmt: str) -> str:
    return re.sub(r"<svg.*?</svg>", "<svg/>", text, flags=re.S) if fmt == "html" else text


def rendered(fmt: str) -> str:
    recs = [t for t in shipped() if t.campaign == "3cef6962"]
    text = writers.render(summary.summarise(recs, "aa-and-cut-under-load", 0.95), fmt)
    return without_figures(text, fmt)


def matches_golden(name: str, text: str) -> bool:
    """Whether text is golden/NAME's (KIT_GOLDEN=write: it becomes so)."""
    path = GOLDEN / name
    if os.environ.get("KIT_GOLDEN") == "write":
        path.write_text(text)
    return text == path.read_text()


@pytest.mark.parametrize("fmt", ["md", "csv", "json", "html"])
def test_report_matches_its_golden_file(fmt):
    assert matches_golden(f"aa-and-cut.{fmt}", rendered(fmt))


Result = Callable[[dict, random.Random], dict]  # a configuration's launch: its result


def launches(configs: list[dict], rounds: int, figure: Result, seed: int) -> list[dict]:
    """A campaign's records: every configuration once a round, 30 s apart on one host;
    figure(config, rng) gives a launch's result."""
    rng = random.Random(seed)
    out = []
    for rnd in range(rounds):
        for config in configs:
            i = len(out)
            when = (T0 + timedelta(seconds=30 * i)).isoformat()
            fields = {k: v for k, v in config.items() if k != "runtime"}
            fields |= {"index": i, "repeat": rnd, "started": when, "host": HOST, "wall_s": 25.0}
            out.append(record(config["runtime"], 0.0, result=figure(config, rng), **fields))
    return out


MESSAGES = (4, 4096, 1048576)


def mpi_sweep(config: dict, rng: random.Random) -> dict:
    """One launch of the MPI sweep: ping-pong (two ranks or more) and allreduce latency
    over message sizes, Singularity's a little slower than native's."""
    slower = 1.08 if config["runtime"] == "singularity" else 1.0
    ranks = config["ranks"]

    def latency(base: float, per_byte: float, n: int) -> float:
        return slower * (base + per_byte * n) * rng.gauss(1, 0.03)

    p2p = [(n, latency(0.4, 1 / 7000, n)) for n in MESSAGES] if ranks > 1 else []
    return {
        "framework_version": "3.1.4",
        "mpi_library": "MPICH 4.0.2",
        "startup_s": 0.3,
        "transport": "one host" if ranks > 1 else "none",
        "p2p": [
            {"bytes": n, "iterations": 100, "latency_us": t, "bandwidth_mb_s": n / t}
            for n, t in p2p
        ],
        "allreduce": [
            {"bytes": n, "iterations": 100, "latency_us": latency(0.2 * ranks, ranks / 9000, n)}
            for n in MESSAGES
        ],
    }


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_a_sweep_report_matches_its_golden_file(fmt):
    """`kit run pytorch-mpich --bench mpi --np 1,2 --runtime native,singularity`: each
    declared series a table of its points; no throughput groups, so no verdicts."""
    mpi = {"bench": "mpi", "model": "-", "batch_size": 0}
    configs = [
        {**mpi, "runtime": rt, "ranks": n} for n in (1, 2) for rt in ("native", "singularity")
    ]
    a = summary.summarise(typed(launches(configs, 6, mpi_sweep, seed=7)), "mpi-sweep", 0.95)
    assert matches_golden(f"sweep.{fmt}", without_figures(writers.render(a, fmt), fmt))


def inception(config: dict, rng: random.Random) -> dict:
    """One launch of InceptionV3 training: 95 % efficient at two ranks, real JPEGs 12 %
    slower than synthetic data."""
    rate = 2.1 * config["ranks"] * 0.95 ** (config["ranks"] - 1)
    rate *= (0.88 if config["data"] == "real" else 1.0) * rng.gauss(1, 0.02)
    return {
        "images_per_sec": rate,
        "startup_s": 14.0 * rng.gauss(1, 0.02),
        "framework_version": "1.13.1",
        "mpi_library": "MPICH 3.3",
    }


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_a_preset_report_matches_its_golden_file(fmt, tmp_path, monkeypatch):
    """A preset's folder as `kit run --preset cscs2017-inception3` leaves it, reported as
    `kit report` does (writers.write): its leg's tables, scaling and I/O overhead, and its
    published figures beside them, each read against what was measured or said not
    measured here. The folder is named relative to the working directory, so the header
    and the JSON name it alike on every machine."""
    monkeypatch.chdir(tmp_path)
    folder = Path("cscs2017")
    presets.save(presets.load("cscs2017-inception3"), folder, full=False)
    leg = {"image": "horovod-mpich", "bench": "tf-cnn", "model": "inception3", "batch_size": 2}
    leg |= {"runtime": "docker", "steps": 3, "warmup_steps": 1}
    configs = [{**leg, "ranks": n, "data": d} for n in (1, 2) for d in ("synthetic", "real")]
    for r in launches(configs, 6, inception, seed=3):
        store.append(folder / "tf-inception3", r)
    path, text = writers.write([folder], fmt, 0.95, False)
    assert path == folder / f"report.{fmt}"
    assert matches_golden(f"preset.{fmt}", text)
