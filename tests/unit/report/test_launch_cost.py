"""A launch's fixed cost by phase (the benchmarks' phases_s) and the campaign's launches a
minute, in the report."""

from datetime import UTC, datetime, timedelta

from kit.analysis import summary
from kit.report import writers
from kit.results import record
from kit.results.record import Trial

from ..records import record as trial
from ..records import typed

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STEADY = {"interpreter": 0.05, "process_group": 0.3, "model_build": 0.4, "warmup": 1.5}


def launch(runtime: str, i: int, start: float, imports: float, wall: float, **kw) -> Trial:
    r = trial(runtime, 100.0, index=i, wall_s=wall, **kw)
    r["started"] = (T0 + timedelta(seconds=i * 20)).isoformat()
    r["result"]["phases_s"] = {"runtime_start": start, **STEADY, "imports": imports, "timed": 2.0}
    return Trial.from_json(r)


def section(text: str, title: str) -> str:
    return text.split(f"## {title}\n\n")[1].split("\n## ")[0]


def test_the_report_tables_each_arms_launch_by_phase_and_the_launches_a_minute():
    recs = [
        *(launch("native", i, s, m, w) for i, (s, m, w) in
          enumerate([(0.10, 2.0, 7.0), (0.12, 2.2, 7.2), (0.11, 2.1, 7.1)])),
        *(launch("apptainer", 3 + i, s, m, w) for i, (s, m, w) in
          enumerate([(1.6, 2.9, 9.0), (1.5, 3.0, 9.0), (1.7, 3.1, 9.2)])),
        # a Slurm job's wall time holds its queueing: no exit or fixed cost from it
        *(launch("native", 6 + i, 0.2, 2.0, 60.0, launcher="slurm") for i in range(2)),
        launch("native", -1, 0.1, 2.0, 30.0, warmup=True),  # 20 s before the first
    ]  # fmt: skip
    text = writers.render(summary.summarise(recs, "x"), "md")
    # native: exits 7.0 - 6.35, 7.2 - 6.57, 7.1 - 6.46; apptainer: 0.25, 0.25, 0.15
    assert section(text, "Launch cost by phase (median s)") == (
        "| image | bench | model | data | batch | ranks | runtime | n | runtime_start | "
        "interpreter | imports | process_group | model_build | warmup | timed | exit | fixed |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        "| pytorch-mpich | torch-cnn | tiny | synthetic | 32 | 2 | native | 3 | 0.11 | 0.05 | "
        "2.10 | 0.30 | 0.40 | 1.50 | 2.00 | 0.64 | 5.10 |\n"
        "| pytorch-mpich | torch-cnn | tiny | synthetic | 32 | 2 | apptainer | 3 | 1.60 | 0.05 "
        "| 3.00 | 0.30 | 0.40 | 1.50 | 2.00 | 0.25 | 7.00 |\n"
        "| pytorch-mpich | torch-cnn | tiny | synthetic | 32 | 2 | native | 2 | 0.20 | 0.05 | "
        "2.00 | 0.30 | 0.40 | 1.50 | 2.00 | n/a | n/a |\n"
        "\n"
        "runtime_start: launch (--launch-time) to this process's creation (/proc/self/stat): "
        "the launcher and the container runtime starting it; interpreter: creation to the "
        "benchmark's main(): exec, the runtime's set-up inside the process, Python's start "
        "and its standard library; imports: the framework's and mpi4py's imports; "
        "process_group: MPI started, the ranks' rendezvous and their communication group; "
        "model_build: model, optimizer and training step built, initial weights shared; "
        "warmup: the untimed steps, the input pipeline's start and first compilations with "
        "them; timed: the timed steps (not fixed cost; what follows them is not measured "
        "inside); exit: the timed steps' end to the launcher's return (gathering, finalizing, "
        "teardown); fixed: the launch's wall time less its timed steps.\n"
        "\n"
        # 8 ok launches in 220 s: from -20 s (the warm-up's start) to 140 + 60 s (the last end)
        "Launches per minute: 2.18 (8 ok launches in 3.7 min, from the first trial's start to "
        "the last one's end, warm-up and failed trials' time included).\n"
    )


def test_a_report_without_phases_has_no_launch_cost_table():
    text = writers.render(summary.summarise(typed([trial("native", 1.0)]), "x"), "md")
    assert "Launch cost" not in text and "Launches per minute" not in text


def test_campaign_minutes_sum_each_campaigns_own_span():
    def at(campaign: str, seconds: float, wall: object) -> dict:
        started = (T0 + timedelta(seconds=seconds)).isoformat()
        return {"campaign": campaign, "started": started, "wall_s": wall}

    recs = [
        at("a", 0, 10.0), at("a", 50, 10.0),  # 0 to 60 s
        at("b", 3600, 5.0), at("b", 3605, 25),  # an hour later: 3600 to 3630 s
        at("b", 9999, None), {"campaign": "b", "started": "when?", "wall_s": 1.0},
    ]  # fmt: skip
    assert record.campaign_minutes(typed(recs)) == 1.5
    assert record.campaign_minutes(typed([at("a", 0, None)])) is None


# The page's width and how a browser sets a table at its narrowest: each column as wide as
# its longest word (a heading breaks where <wbr> allows, a cell after a hyphen), at about
# 0.6 em a character of sans-serif, with its padding and border.
PAGE_PX, EM_PX, CHAR_EM = 1100, 16, 0.6


def narrowest_px(table: str) -> float:
    import re

    font = 0.8 if 'class="wide"' in table else 0.9
    pad = 2 * (4 if font == 0.8 else 6) + 1
    heads = re.findall(r"<th>(.*?)</th>", table)
    rows = [re.findall(r"<td>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", table)]
    words = [[w for part in h.split("<wbr>") for w in part.split()] for h in heads]
    for cells in rows[1:]:
        for i, c in enumerate(cells):
            words[i] += [w for x in c.split() for w in re.split(r"(?<=-)", x)]
    longest = [max(len(w) for w in ws) for ws in words]
    return sum(n * CHAR_EM * EM_PX * font + pad for n in longest)


def test_the_launch_phase_table_fits_the_html_page():
    """Every phase, the longest runtime name and image: no sideways scroll at 1100 px."""
    recs = [
        launch(arm, i, 0.1, 2.0, 7.0, image="horovod-openmpi", model="inception3")
        for i, arm in enumerate(["native", "singularity-bind"] * 3)
    ]
    page = writers.render(summary.summarise(recs, "x"), "html")
    table = page.split("Launch cost by phase (median s)</h2>")[1].split("</table>")[0]
    assert table.count("<th>") == 17  # every phase, exit and fixed
    assert narrowest_px(table) <= PAGE_PX
