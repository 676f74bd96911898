"""The results store survives a cut-off write; the report summarises rates honestly."""

import csv
import dataclasses
import io
import json
import random
import re
from pathlib import Path

import pytest

from kit.analysis import stats, summary
from kit.analysis.findings import Arm
from kit.core.errors import KitError
from kit.report import arms, model, plots, sentences, writers
from kit.report.text import interval
from kit.results import store

from ..records import record, typed


def test_append_ends_a_cut_line_before_the_next_record(tmp_path, capsys):
    store.append(tmp_path, record("native", 1.0, index=0))
    with open(tmp_path / store.FILE, "a") as f:
        f.write('{"index": 1, "cut')
    store.append(tmp_path, record("native", 2.0, index=2))
    loaded = store.load(tmp_path)
    assert [t.index for t in loaded.records] == [0, 2]
    assert loaded.problems == [f"{tmp_path / store.FILE}:2: not a JSON line"]
    assert "trials.jsonl:2: not a JSON line (skipped)" in capsys.readouterr().err


def md(out_dir, **kw):
    return writers.render(summary.analyse([out_dir], **kw), "md")


def rows_of(text):
    return {
        line.split(" | ")[0].strip("| "): line
        for line in text.splitlines()
        if line.startswith("| ") and "runtime" not in line
    }


def test_report_rows_ratio_verdict_and_detectable(tmp_path):
    rng = random.Random(3)
    for _ in range(8):
        store.append(tmp_path, record("native", rng.gauss(1000, 5)))
        store.append(tmp_path, record("docker", rng.gauss(800, 5), startup=2.0))
        store.append(tmp_path, record("singularity", rng.gauss(1000, 5)))
    store.append(tmp_path, record("docker", 1.0, warmup=True))
    store.append(tmp_path, record("docker", 0.0, status="timeout", index=99) | {"result": None})
    text = md(tmp_path)
    rows = rows_of(text)
    assert set(rows) == {"native", "docker", "singularity"}
    assert "| 0.79" in rows["docker"] and "| slower |" in rows["docker"]
    assert "no significant difference" in rows["singularity"]
    assert "1 (reference)" in rows["native"]
    # 0.5% noise per trial, 8 trials per arm: only about a 1% difference is detectable
    detectable = float(rows["singularity"].split(" | ")[4].strip("±%"))
    assert 0.2 < detectable < 2.0
    assert f"26 trials in {tmp_path}: 24 ok, 1 not ok, 1 warm-up (discarded)" in text
    assert "#99 docker np=2 tiny bs=32: timeout" in text


def test_mismatched_software_is_refused_unless_allowed(tmp_path):
    for rate in (100, 101, 102, 103, 104, 105):
        store.append(tmp_path, record("native", rate))
        other = record("docker", rate)
        other["result"]["framework_version"] = "2.0"
        store.append(tmp_path, other)
    refused = rows_of(md(tmp_path))["docker"]
    assert "not compared: software differs from native (2.0 / MPICH 4.0.2 vs 1.13" in refused
    assert "| n/a |" in refused
    allowed = rows_of(md(tmp_path, allow_mismatch=True))["docker"]
    assert "no significant difference (MISMATCHED SOFTWARE)" in allowed


def test_too_few_trials_are_flagged(tmp_path):
    for rate in (100, 101, 102):
        store.append(tmp_path, record("native", rate))
        store.append(tmp_path, record("native@b", rate))
    text = md(tmp_path)
    assert "too few trials (need 6)" in rows_of(text)["native@b"]
    assert "†" in text


def test_a_verdict_short_of_rounds_with_every_launch_says_so_and_prices_nothing(tmp_path):
    """Five rounds give the kept launches' t interval, but with the launch another job
    slowed put back the check's rank interval needs six: the answer is "too few trials",
    not a range, and no precision is priced from such widths."""
    paired_campaign(tmp_path, 5)
    slowed = record("native", 400.0, repeat=2, index=99)
    slowed["host_load"] = {"other_cpu_pct": 55.0, "steal_cpu_pct": 0.0}
    store.append(tmp_path, slowed)
    text = md(tmp_path)
    assert "\n- docker: too few trials (need 6).\n" in text
    assert "What precision costs here" not in text


def test_scaling_efficiency_against_one_rank(tmp_path):
    """Over ranks, and over the nodes they ran on (their records' hosts)."""
    for rate in (100, 101, 99, 100, 102, 98):
        store.append(tmp_path, record("native", rate, ranks=1))
        two = record("native", rate * 1.6, ranks=2)
        two["result"]["hosts"] = ["n1", "n2"]
        store.append(tmp_path, two)
    a = summary.analyse([tmp_path])
    (s,) = a.scaling
    assert (s.key.ranks, s.nodes, s.runtime) == (2, 2, "native")
    assert s.efficiency.value == pytest.approx(0.8)
    assert (
        "| pytorch-mpich | torch-cnn | tiny | synthetic | 32 | 2 | 2 | native | 0.800 ["
        in writers.render(a, "md")
    )


def test_every_format_renders_the_same_analysis(tmp_path):
    for i, rate in enumerate((100, 101, 99, 100, 102, 98)):
        store.append(tmp_path, record("native", rate, batch_size=16, index=i))
        store.append(tmp_path, record("docker", rate * 0.9, batch_size=16, index=10 + i))
        store.append(tmp_path, record("docker", rate * 1.8, batch_size=32, index=20 + i))
    a = summary.analyse([tmp_path])
    rows = list(csv.DictReader(io.StringIO(writers.render(a, "csv"))))
    assert [(r["runtime"], r["batch_size"]) for r in rows] == [
        ("native", "16"),
        ("docker", "16"),
        ("docker", "32"),
    ]
    assert float(rows[1]["ratio"]) == pytest.approx(0.9) and rows[1]["verdict"] == "slower"
    data = json.loads(writers.render(a, "json"))
    assert data["groups"][0]["arms"][1]["ratio"]["value"] == pytest.approx(0.9)
    page = writers.render(a, "html")
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    ids = re.findall(r'<figure id="([^"]+)"><svg', page)
    assert ids == [
        "rate-pytorch-mpich-torch-cnn-tiny-synthetic-np2",
        "mem-pytorch-mpich-torch-cnn-tiny-synthetic-np2",
        "overhead-pytorch-mpich-torch-cnn-tiny",
    ]
    assert page.count("<svg") == 3
    assert re.findall(r'(?:src|href)="([^"#][^"]*)"', page) == []  # nothing fetched


def test_report_of_empty_dir_is_a_clear_error(tmp_path):
    with pytest.raises(KitError, match="no trial records"):
        summary.analyse([tmp_path])


def test_io_overhead_from_real_and_synthetic_data(tmp_path):
    for i, rate in enumerate((100, 101, 99, 100, 102, 98)):
        for data, scale in (("synthetic", 1.0), ("real", 0.75)):
            r = record("native", rate * scale, index=i)
            r["result"]["data"] = data
            store.append(tmp_path, r)
    a = summary.analyse([tmp_path])
    (x,) = a.io
    assert (x.key.data, x.runtime) == ("real", "native")
    assert x.overhead.value == pytest.approx(0.25)
    assert x.overhead.low <= 0.25 <= x.overhead.high
    text = writers.render(a, "md")
    assert "## I/O overhead" in text and "| native | 0.250 [" in text
    assert "· real data" in text
    rows = list(csv.DictReader(io.StringIO(writers.render(a, "csv"))))
    assert {r["data"] for r in rows} == {"synthetic", "real"}


def mpi_record(runtime, scale, ranks=2):
    r = record(runtime, 0.0, bench="mpi", model="-", batch_size=0, ranks=ranks)
    r["result"] = {
        "framework_version": "3.1.4",
        "mpi_library": "MPICH 4.0.2",
        "startup_s": 0.1,
        "p2p": [
            {"bytes": b, "iterations": 9, "latency_us": scale * (0.5 + b / 1e4),
             "bandwidth_mb_s": b / (scale * (0.5 + b / 1e4))}
            for b in (4, 4096)
        ] if ranks > 1 else [],
        "allreduce": [
            {"bytes": b, "iterations": 9, "latency_us": scale * (1 + b / 1e4)} for b in (4, 4096)
        ],
    }  # fmt: skip
    return r


def test_mpi_sweeps_and_out_of_memory_are_reported(tmp_path):
    for i in range(6):
        store.append(tmp_path, mpi_record("native", 1 + i / 100))
        store.append(tmp_path, mpi_record("singularity", 2 + i / 100))
        store.append(tmp_path, mpi_record("native", 1, ranks=1) | {"index": 100 + i})
        store.append(tmp_path, record("native", 1000.0 + i))
    store.append(tmp_path, record("docker", 0, batch_size=512, status="oom", result=None))
    a = summary.analyse([tmp_path])
    assert [(s.series, s.runtime, s.ranks, s.n) for s in a.sweeps] == [
        ("allreduce", "native", 1, 6),  # one rank: no ping-pong series
        ("p2p", "native", 2, 6), ("allreduce", "native", 2, 6),
        ("p2p", "singularity", 2, 6), ("allreduce", "singularity", 2, 6),
    ]  # fmt: skip
    p2p = a.sweeps[1].points
    assert [p.at for p in p2p] == [(4,), (4096,)]
    assert p2p[0].values["latency_us"].value == pytest.approx(0.5 * 1.025, rel=0.01)
    assert a.oom == [
        {"image": "pytorch-mpich", "bench": "torch-cnn", "model": "tiny", "batch_size": 512,
         "ranks": 2, "runtime": "docker", "trials": 1}
    ]  # fmt: skip
    assert a.not_ok == [] and len(a.groups) == 1  # sweeps are not throughput groups
    text = writers.render(a, "md")
    assert "## MPI (mpi4py): ping-pong between ranks 0 and 1" in text
    assert (
        "| image | ranks | launcher | transport | runtime | n | bytes | latency µs [CI] "
        "| bandwidth MB/s [CI] | MPI library |" in text
    )
    assert (
        "| pytorch-mpich | 2 | local | - | singularity | 6 | 4 | 1.01 [1.00, 1.03] | 4 [4, 4] "
        "| MPICH 4.0.2 |" in text
    )
    assert "## MPI (mpi4py): allreduce, float32 sum over all ranks" in text
    assert (
        "| pytorch-mpich | 1 | local | - | native | 6 | 4096 | 1.41 [1.41, 1.41] | MPICH 4.0.2 |"
        in text
    )
    assert "## Did not fit in memory (out of memory is a result)" in text
    assert "| pytorch-mpich | torch-cnn | tiny | 512 | 2 | docker | 1 |" in text
    page = writers.render(a, "html")
    for slug in (
        "mpi-p2p-latency_us-pytorch-mpich-np2",
        "mpi-p2p-bandwidth_mb_s-pytorch-mpich-np2",
        "mpi-allreduce-latency_us-pytorch-mpich-np1",
    ):
        assert f'id="{slug}"' in page
    assert 'id="mpi-p2p-latency_us-pytorch-mpich-np1"' not in page


def test_local_and_slurm_campaigns_side_by_side(tmp_path):
    local, batch = tmp_path / "local", tmp_path / "slurm"
    for i in range(6):
        store.append(local, record("native", 1000.0 + i))
        store.append(batch, record("native", 990.0 + i, launcher="slurm"))
    a = summary.analyse([local, batch])
    assert [g.key.launcher for g in a.groups] == ["local", "slurm"]
    text = writers.render(a, "md")
    assert "## pytorch-mpich · torch-cnn · tiny · batch 32 · 2 rank(s)\n" in text
    assert "## pytorch-mpich · torch-cnn · tiny · batch 32 · 2 rank(s) · via slurm\n" in text
    assert text.startswith("# kit report: pytorch-mpich (torch-cnn), on ?\n")  # no hostname
    assert f"12 trials in {local}, {batch}: 12 ok" in text


def test_the_title_names_the_campaign_not_the_path_asked_for(tmp_path, monkeypatch):
    """'kit report .' inside the results folder: the title says what was measured, when
    and where (#34)."""
    for i in range(6):
        started = f"2026-11-23T18:{37 + i:02d}:40+00:00"
        for rt in ("native", "docker"):
            store.append(
                tmp_path,
                record(
                    rt, 100.0 + i, repeat=i, started=started, host={"hostname": "vm", "cores": 2}
                ),
            )
    monkeypatch.chdir(tmp_path)
    text = writers.render(summary.analyse([Path(".")]), "md")
    assert text.startswith(
        "# kit report: pytorch-mpich (torch-cnn), 2026-11-23 18:37 to 18:42 UTC, on vm\n"
    )
    assert "12 trials in .: 12 ok" in text


def test_the_precision_cell_says_one_thing():
    arm = Arm(
        "docker",
        3,
        *([stats.Interval(1, 1, 1, 1)] * 1),
        [],
        stats.Interval(1, 1, 1, 1),
        None,
        0.0,
        "",
        "",
        [],
        half_width=0.284,
        precision="not reached",
    )
    assert arms._precision(arm, 0.02) == "±28.4% (target ±2.0% not reached)"
    assert (
        arms._precision(dataclasses.replace(arm, precision="reached", half_width=0.018), 0.02)
        == "±1.8% (target ±2.0% reached)"
    )
    assert arms._precision(dataclasses.replace(arm, precision=""), None) == "±28.4%"


def paired_campaign(out, rounds, seed=5):
    rng = random.Random(seed)
    for r in range(rounds):
        store.append(out, record("native", rng.gauss(1000, 20), repeat=r, index=2 * r))
        store.append(out, record("docker", rng.gauss(950, 20), repeat=r, index=2 * r + 1))


def test_confidence_flag_end_to_end(tmp_path):
    """kit report --confidence: wider intervals at 0.99 on the same trials, and the
    'too few' marker decided at the level asked for (7 trials: a median's order-statistic
    interval is enough for 95 %, not 99 %; a paired ratio needs 3 rounds at any level)."""
    paired_campaign(tmp_path / "ten", 10)
    r95, r99 = (
        summary.analyse([tmp_path / "ten"], confidence=c).groups[0].arms[1].ratio
        for c in (0.95, 0.99)
    )
    assert r99.low < r95.low and r95.high < r99.high
    paired_campaign(tmp_path / "seven", 7)
    rows95, rows99 = (
        rows_of(writers.render(summary.analyse([tmp_path / "seven"], confidence=c), "md"))
        for c in (0.95, 0.99)
    )
    assert "†" not in rows95["native"].split(" | ")[2]
    assert "†" in rows99["native"].split(" | ")[2]  # [min, max] covers only 98.4 %
    assert "paired (7 rounds)" in rows99["docker"] and "| slower |" in rows99["docker"]
    assert "paired (7 rounds)" in rows95["docker"] and "| slower |" in rows95["docker"]


def test_one_trial_a_side_is_reported_not_crashed(tmp_path):
    store.append(tmp_path, record("native", 100.0))
    store.append(tmp_path, record("docker", 90.0, index=1))
    row = rows_of(md(tmp_path))["docker"]
    assert "too few trials (need 6)" in row and "| n/a |" in row


def three_arms(out, rounds=12, seed=7):
    """Singularity 10 % faster than Docker, which is 10 % slower than native."""
    rng = random.Random(seed)
    for r in range(rounds):
        for i, (rt, rate) in enumerate((("native", 1000), ("docker", 900), ("singularity", 990))):
            store.append(out, record(rt, rng.gauss(rate, 5), repeat=r, index=3 * r + i))


def test_baseline_makes_another_arm_the_reference(tmp_path):
    three_arms(tmp_path)
    text = md(tmp_path, baseline="docker")
    assert "| runtime | n | images/s median [CI] | vs docker [CI] |" in text
    rows = rows_of(text)
    assert "1 (reference)" in rows["docker"]
    assert "| 1.1" in rows["singularity"] and "| faster |" in rows["singularity"]
    assert "| 1.1" in rows["native"] and "| faster |" in rows["native"]
    with pytest.raises(
        KitError,
        match="baseline 'podman' is not an arm of these results "
        r"\(arms: docker, native, singularity\); choose one",
    ):
        summary.analyse([tmp_path], baseline="podman")


def test_all_pairs_in_one_family(tmp_path):
    """--baseline all: the table against native, then every other pair; the Bonferroni
    family counts them all."""
    three_arms(tmp_path)
    a = summary.analyse([tmp_path], baseline="all")
    assert a.comparisons == 3 and a.each_confidence == pytest.approx(1 - 0.05 / 3)
    (pair,) = a.groups[0].pairs
    assert (pair.runtime, pair.against, pair.verdict) == ("singularity", "docker", "faster")
    assert pair.ratio.value == pytest.approx(1.1, abs=0.01)
    text = writers.render(a, "md")
    assert "| runtime | over | ratio [CI] |" in text
    assert "\n| singularity | docker | 1.1" in text and "Bonferroni: each at 98.33%" in text
    rows = list(csv.DictReader(io.StringIO(writers.render(a, "csv"))))
    assert [(r["runtime"], r["against"]) for r in rows] == [
        ("native", ""),
        ("docker", "native"),
        ("singularity", "native"),
        ("singularity", "docker"),
    ]


def test_the_report_compares_as_the_run_was_told_to(tmp_path):
    """kit run --baseline all saves it with the campaign: kit report then holds every
    pair without being told again, and its own --baseline still wins."""
    store.open_campaign(tmp_path, {"baseline": "all"}, resume=False)
    three_arms(tmp_path)
    _, text = writers.write([tmp_path], "md", 0.95, False)
    assert "\n| singularity | docker | 1.1" in text
    _, text = writers.write([tmp_path], "md", 0.95, False, "native")
    assert "| runtime | over |" not in text


def test_cpu_and_cuda_campaigns_are_not_pooled(tmp_path):
    """Variant and benchmark options are part of what was measured: a cuda campaign, or
    a bf16 one, is never pooled with a cpu fp32 one."""
    for i in range(6):
        store.append(tmp_path, record("native", 10.0 + i, variant="cpu"))
        store.append(tmp_path, record("native", 500.0 + i, variant="cuda"))
        store.append(
            tmp_path, record("native", 20.0 + i, variant="cpu", bench_args=["--precision", "bf16"])
        )
    a = summary.analyse([tmp_path])
    assert [(g.key.variant, g.key.bench_args) for g in a.groups] == [
        ("cpu", ""),
        ("cpu", "--precision bf16"),
        ("cuda", ""),
    ]
    text = writers.render(a, "md")
    assert "## pytorch-mpich · torch-cnn · tiny · batch 32 · 2 rank(s) · cuda\n" in text
    assert "· 2 rank(s) · --precision bf16\n" in text
    rows = list(csv.DictReader(io.StringIO(writers.render(a, "csv"))))
    assert [(r["variant"], r["launcher"], r["median"]) for r in rows] == [
        ("cpu", "local", "12.5"),
        ("cpu", "local", "22.5"),
        ("cuda", "local", "502.5"),
    ]


def grpc_record(runtime: str, latency: float, index: int) -> dict:
    rows = [
        {"payload": p, "mode": m, "bytes": n, "iterations": 9, "latency_us": latency * n,
         "bandwidth_mb_s": 1.0 / latency, "throughput_mb_s": 2.0 / latency}
        for p in ("uniform", "skew") for m in ("serialized", "non-serialized") for n in (8, 64)
    ]  # fmt: skip
    result = {
        "bench": "grpc", "framework_version": "1.74.0", "mpi_library": "MPICH", "servers": 1,
        "startup_s": 1.0, "p2p": rows, "ps": rows,
    }  # fmt: skip
    return record(runtime, 0, bench="grpc", index=index, result=result)


def test_grpc_sweeps_are_tabled_and_drawn_per_payload_and_mode(tmp_path):
    for i in range(6):
        store.append(tmp_path, grpc_record("native", 1 + i / 100, 2 * i))
        store.append(tmp_path, grpc_record("docker", 2 + i / 100, 2 * i + 1))
    a = summary.analyse([tmp_path])
    assert [(s.series, s.runtime, s.n, s.version) for s in a.sweeps] == [
        ("p2p", "native", 6, "1.74.0"), ("ps", "native", 6, "1.74.0"),
        ("p2p", "docker", 6, "1.74.0"), ("ps", "docker", 6, "1.74.0"),
    ]  # fmt: skip
    keys = [p.at for p in a.sweeps[0].points]
    assert keys[:3] == [("skew", "non-serialized", 8), ("skew", "non-serialized", 64),
                        ("skew", "serialized", 8)]  # fmt: skip
    assert len(keys) == 8 and a.groups == []
    text = writers.render(a, "md")
    assert "## gRPC: Echo from rank 0 to rank 1" in text
    assert "## gRPC: parameter-server push and pull, every rank to each server" in text
    assert (
        "| docker | 6 | uniform | serialized | 64 | 129.6 [128.0, 131.2] | 0.5 [0.5, 0.5] "
        "| 1.74.0 |" in text
    )
    page = writers.render(a, "html")
    for slug in ("grpc-p2p-latency_us", "grpc-p2p-bandwidth_mb_s", "grpc-ps-throughput_mb_s"):
        assert f'id="{slug}-pytorch-mpich-np2-native"' in page


def quoted(cells: list[tuple[str, float, float]], n: int = 2) -> list[str]:
    """The report's opening sentences for an analysis whose arms have these ratio
    intervals (runtime, low, high) against native, one family of n comparisons."""
    a = summary.summarise(typed([record("native", 1.0, repeat=r, index=r) for r in range(3)]), "")
    a.comparisons = n
    for rt, low, high in cells:
        arm = dataclasses.replace(a.groups[0].arms[0], runtime=rt, against="native")
        arm.ratio = stats.Interval((low + high) / 2, low, high, 0.99)
        arm.verdict = stats.verdict(arm.ratio)
        a.groups[0].arms.append(arm)
    return sentences.answers(a)


def test_the_report_opens_with_one_quotable_sentence_per_comparison(tmp_path):
    said = quoted([("docker", 0.979, 1.034), ("podman", 0.90, 0.95), ("shifter", 1.01, 1.05)], 3)
    assert said == [
        "docker: between 2.1 % slower and 3.4 % faster than native (95% for all three together).",
        "podman: between 5.0 % and 10.0 % slower than native (95% for all three together).",
        "shifter: between 1.0 % and 5.0 % faster than native (95% for all three together).",
    ]
    assert quoted([("docker", 0.98, 1.02)], 1) == [
        "docker: between 2.0 % slower and 2.0 % faster than native (95%)."
    ]
    rng = random.Random(5)
    for r in range(10):
        store.append(tmp_path, record("native", rng.gauss(1000, 5), repeat=r, index=2 * r))
        store.append(tmp_path, record("docker", rng.gauss(900, 5), repeat=r, index=2 * r + 1))
    text = md(tmp_path)
    first = text.splitlines()[2]
    assert first.startswith("- docker: between ") and first.endswith(" slower than native (95%).")
    assert text.index(first) < text.index("| runtime")
    html_text = writers.render(summary.analyse([tmp_path]), "html")
    assert html_text.index("<ul class=answers><li>docker: between ") < html_text.index("<table>")


def test_loss_figure_draws_only_steps_every_trial_reached_each_line_its_own(tmp_path):
    """With --min-time, trials run different step counts: the loss curve stops at the
    steps every trial reached and the caption says how many trials each point holds;
    runtimes with the very same losses (same seed) still show a line each (#34)."""
    for r in range(6):
        for rt in ("native", "docker", "podman", "singularity", "charliecloud"):
            steps = 3 + (r % 3) + (rt == "docker")  # 3, 4 or 5 timed steps; docker one more
            rec = record(rt, 100.0, repeat=r)
            rec["result"]["loss"] = [2.0, 1.5, 1.2, 1.1, 5.4, 9.9][:steps]
            store.append(tmp_path, rec)
    a = summary.analyse([tmp_path])
    assert {tuple(arm.loss) for arm in a.groups[0].arms if arm.runtime != "docker"} == {
        (2.0, 1.5, 1.2)
    }
    (fig,) = [f for f in plots.figures(a) if f.slug.startswith("loss")]
    assert "only the 3 steps every trial reached are drawn" in fig.caption  # docker's 4th too
    assert len(re.findall(r"<g id=\"line2d_\d+\">\s*<path d=\"M [^\"]*\"", fig.svg)) >= 5
    assert "every point holds all of an arm's trials (native 6, charliecloud 6, docker 6, " in (
        fig.caption
    )
    assert fig.svg.count('<g id="line2d_') >= 5
    widths = set(re.findall(r"stroke-width: ([0-9.]+)", fig.svg))
    dashes = set(re.findall(r"stroke-dasharray: ([0-9.,]+)", fig.svg))
    assert len(widths) >= 5 and len(dashes) >= 2  # five widths, and dashes besides solid


def test_a_sweep_is_tabled_and_drawn_from_its_declaration_alone(tmp_path):
    """allgather has no analyser, table or figure of its own: its declaration's series
    makes its section, columns and figures. Inside one node and across two (--hosts) are
    rows side by side, each with the transport its trials saw."""
    for i in range(12):
        r = record("native", 0, bench="allgather", model="-", batch_size=0, index=i)
        rows = [{"bytes": b, "iterations": 9, "latency_us": (1 + i / 100) * b,
                 "bandwidth_mb_s": 2.0 * b} for b in (4, 64)]  # fmt: skip
        r["result"] = {"mpi_library": "MPICH 4.0.2", "startup_s": 0.1, "allgather": rows,
                       "transport": "one host", "hosts": ["n1"]}  # fmt: skip
        if i >= 6:
            r |= {"launcher": "mpirun over ssh", "host_list": ["n1", "n2"]}
            r["result"] |= {"transport": "tcp over eth0", "hosts": ["n1", "n2"]}
        store.append(tmp_path, r)
    a = summary.analyse([tmp_path])
    text = writers.render(a, "md")
    assert "## MPI allgather (mpi4py): allgather, float32 from every rank to every rank" in text
    assert (
        "| image | ranks | launcher | transport | runtime | n | bytes | latency µs [CI] "
        "| received MB/s [CI] | MPI library |\n|---|---|---|---|---|---|---|---|---|---|\n"
        "| pytorch-mpich | 2 | hosts | tcp over eth0 | native | 6 | 4 | 4.34 [4.24, 4.44] "
        "| 8 [8, 8] | MPICH 4.0.2 |\n"
        "| pytorch-mpich | 2 | hosts | tcp over eth0 | native | 6 | 64 |"
    ) in text
    assert (
        "| pytorch-mpich | 2 | local | one host | native | 6 | 4 | 4.10 [4.00, 4.20] | 8 [8, 8] "
        "| MPICH 4.0.2 |"
    ) in text
    assert a.crowded == []
    page = writers.render(a, "html")
    for value in ("latency_us", "bandwidth_mb_s"):
        assert f'id="allgather-allgather-{value}-pytorch-mpich-np2"' in page


def test_a_figure_of_any_size_stays_readable():
    """A user's command may report ops/s in the hundreds of millions."""
    big = stats.Interval(691586293.0, 688648144.2, 699945933.0, 0.95)
    assert interval(big, 1) == "6.916e+08 [6.886e+08, 6.999e+08]"
    assert interval(stats.Interval(9.25, 9.0, 9.5, 0.95), 1) == "9.2 [9.0, 9.5]"


def test_a_compiled_models_compile_time_has_a_column_of_its_own(tmp_path):
    """torch-cnn --compile: the first step's compile beside the start-up that includes it;
    an eager campaign's table keeps its columns."""
    for i in range(6):
        for rt, compile_s in (("native", 14.0 + i / 10), ("docker", 15.0 + i / 10)):
            r = record(rt, 100.0 + i, startup=compile_s + 1, repeat=i, index=2 * i)
            r["result"]["compile_s"] = compile_s
            store.append(tmp_path / "c", r)
    text = md(tmp_path / "c")
    head = next(x for x in text.splitlines() if x.startswith("| runtime"))
    assert "| start-up s [CI] | compile s [CI] | host load" in head
    assert "| 14.2 [14.0, 14.5]" in rows_of(text)["native"]
    # kernels built for other vector instructions are other software: not compared
    for i, t in enumerate(store.load(tmp_path / "c").records):
        t.result["compile_isa"] = "avx512" if t.runtime == "docker" else "INVALID_VEC_ISA"
        store.append(tmp_path / "isa", t.to_json() | {"index": i})
    assert "not compared: software differs from native (1.13, inductor avx512" in md(
        tmp_path / "isa"
    )
    paired_campaign(tmp_path / "eager", 6)
    assert "compile s" not in md(tmp_path / "eager")


def test_the_report_names_each_images_recipe_and_stack():
    """Today's and the studies' stacks side by side are told apart in the header."""
    recs = [
        record("native", 9.0, index=i, image=img, recipe_version=v, stack=s)
        for i, (img, v, s) in enumerate(
            [("pytorch2-mpich", "2.0.0", "current"), ("pytorch-mpich", "1.2.0", "historical")]
        )
    ]
    text = writers.render(summary.summarise(typed(recs), "x", 0.95), "md")
    assert (
        "Images: pytorch-mpich (recipe 1.2.0, historical stack); pytorch2-mpich (recipe "
        "2.0.0, current stack)."
    ) in text


def test_a_trial_whose_ranks_shared_a_host_is_named():
    """Ranks that silently landed on one node measured no network, whether a host list or
    a Slurm job's nodes spread them: the report says so."""
    listed = {"launcher": "mpirun over ssh", "host_list": ["n1", "n2"]}
    job = {"launcher": "slurm", "slurm": {"job_id": "7", "nodes": "n[1-2]", "script": "s"}}
    recs = []
    for i, (how, ran) in enumerate(
        [(listed, ["n1"]), (listed, ["n1", "n2"]), (job, ["n2"]), (job, ["n1", "n2"])]
    ):
        recs.append(record("native", 9.0, index=4 + i, ranks=2, **how))
        recs[-1]["result"]["hosts"] = ran
    a = summary.summarise(typed(recs), "x", 0.95)
    assert a.crowded == [
        "trial 4 (native, torch-cnn, 2 ranks): ranks on n1, where n1, n2 were asked for",
        "trial 6 (native, torch-cnn, 2 ranks): ranks on n2, where the job was given nodes n[1-2]",
    ]
    assert "## Ranks on fewer hosts than asked\n\n- trial 4 (native" in writers.render(a, "md")


def test_what_a_user_typed_stays_in_its_table_cell():
    """A '|' in a unit (--unit 'img|s') split the Markdown table; a newline (from a record
    edited by hand: kit run refuses one) added a heading."""
    table = model.Table(["x | unit median [CI]"], [["1.0 img|s"], ["a\n## injected"]])
    doc = model.Document("kit report: a\nb", [], [model.Section("s\n# t", [table])],
                            table, {})  # fmt: skip
    assert writers.RENDERERS["md"](doc).splitlines() == [
        "# kit report: a\\nb",
        "",
        "## s\\n# t",
        "",
        "| x \\| unit median [CI] |",
        "|---|",
        "| 1.0 img\\|s |",
        "| a\\n## injected |",
    ]


def test_a_figure_not_above_0_is_left_out_of_the_analysis_and_said(tmp_path, capsys):
    """A record kit's reading did not check (a hand edit, an older kit's) whose figure is
    0 or less is left out with a note the report shows: never a log of it, never nan."""
    for i in range(6):
        store.append(tmp_path, record("native", 100.0 + i, index=2 * i))
        store.append(tmp_path, record("docker", 90.0 + i, index=2 * i + 1))
    store.append(tmp_path, record("docker", 0.0, index=20))
    store.append(tmp_path, record("docker", -3.0, index=21))
    a = summary.analyse([tmp_path])
    must = "a figure must be finite and above 0"
    assert a.left_out == [
        f"trial 20 of campaign c0 (docker): metric 'images_per_sec' read 0: {must}",
        f"trial 21 of campaign c0 (docker): metric 'images_per_sec' read -3: {must}",
    ]
    assert [arm.n for arm in a.groups[0].arms] == [6, 6] and a.ok == 12
    err = capsys.readouterr().err.splitlines()
    assert err == [f"kit: warning: {note} (left out of the analysis)" for note in a.left_out]
    text = writers.render(a, "md")
    assert "2 ok trials left out: their figure is no number above 0." in text
    assert "## Trials left out of the analysis" in text and f"read -3: {must}" in text
    assert "nan" not in text.lower()


def test_a_campaign_in_progress_leaves_out_a_commands_figure_of_0():
    """The stop rule of a --precision campaign summarises the records it holds: a figure
    of 0 there is left out, not a math domain error."""
    declared = {"key": "value", "name": "rate", "unit": "", "higher_is_better": True}

    def ran(arm: str, value: float, i: int) -> dict:
        result = {"schema": "kit.command/1", "bench": "cmd", "metric": declared, "value": value}
        return record(arm, 0.0, index=i, repeat=i // 2, bench="cmd", model="-", result=result)

    records = [ran("native", 5.0, 0), ran("docker", 4.0, 1), ran("native", 0.0, 2)]
    records += [ran("docker", 4.5, 3)]
    a = summary.summarise(typed(records), "", target=0.05)
    assert a.left_out == [
        "trial 2 of campaign c0 (native): metric 'rate' read 0: a figure must be finite and above 0"
    ]
    assert {arm.runtime: arm.n for arm in a.groups[0].arms} == {"native": 1, "docker": 2}


def test_the_host_load_column_gives_the_runtimes_helpers_apart():
    """'1.00 / 2%, helpers 20%': the runtime's helpers' CPU beside, not in, the other
    processes' share; an arm without helpers, or records older than the share, show none."""
    busy = {"loadavg_1m": 1.0, "other_cpu_pct": 2.0, "helper_cpu_pct": 20.0}
    quiet = {"loadavg_1m": 1.0, "other_cpu_pct": 2.0, "helper_cpu_pct": 0.0}
    older = {"loadavg_1m": 1.0, "other_cpu_pct": 2.0}
    loads = [arms._load(Arm("a", 3, None, [], None, None, 0, "", "", [], load=x))
             for x in (busy, quiet, older)]  # fmt: skip
    assert loads == ["1.00 / 2%, helpers 20%", "1.00 / 2%", "1.00 / 2%"]
    trials = typed([record("podman", 10.0, index=i, host_load=busy) for i in range(3)])
    assert summary.summarise(trials, "", 0.95).groups[0].arms[0].load == busy
