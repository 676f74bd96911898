"""The campaign loop driven with a runtime and a launcher that start nothing: rounds in
their seeded order, warm-up, resume, each way a trial can end, and the precision rule."""

import contextlib
import dataclasses
import json
import os

import pytest

from kit import cli
from kit.analysis import stats
from kit.core import benches
from kit.core.errors import RunFailed
from kit.image import recipes
from kit.launch import hostload, launchers, outcomes
from kit.run import campaign, plan
from kit.runtimes import Prepared, Runtime

from ..records import record, typed

CONFIG = plan.Config("torch-cnn", "tiny", 32, 2)
RATES = {"native": 100.0, "docker": 90.0}


class Fake(Runtime):
    """Declared like a runtime, prepared without an image."""

    tool = "true"

    def __init__(self, arm: str) -> None:
        self.arm = arm

    def check(self) -> None:
        pass

    def version(self) -> str:
        return "fake 1"

    def prepare(self, recipe, variant) -> Prepared:
        return Prepared("img", "sha256:f", "python", "/bench", settings=("prepared",))

    def exec_argv(self, prep, job) -> list[str]:
        return job.program


class Scripted(launchers.Launcher):
    """Ends the n-th trial it starts as `ends` says (default ok, at the arm's rate)."""

    name = "scripted"

    def __init__(self, ends: dict[int, str] | None = None) -> None:
        self.ends, self.started = ends or {}, []

    def mpi_version(self, mpirun: str) -> str:
        return "fake MPI"

    def run(self, rt, prep, job, env, timeout, title) -> launchers.Launched:
        n = len(self.started)
        self.started.append((rt.arm, job.name, env.get("FAKE")))
        end = self.ends.get(n, "ok")
        rate = RATES[rt.arm.split("@")[0]] * (1 + 0.001 * (n % 3))
        result = {
            "schema": benches.SCHEMA,
            "images_per_sec": rate,
            "startup_s": 0.5,
            "framework_version": "1.13",
            "mpi_library": "MPICH 4.0.2",
        }
        tail = "RuntimeError: out of memory" if end == "oom" else "boom"
        outcome = outcomes.Outcome(
            "failed" if end == "oom" else end,
            0 if end == "ok" else 1,
            0.0,
            result if end == "ok" else None,
            "" if end == "ok" else tail,
            output="" if end == "ok" else f"first line\n{tail}",
        )
        return launchers.Launched(["fake", job.name], outcome)


def run(tmp_path, launcher, repeats=3, warmups=1, done=frozenset(), target=None) -> str:
    recipe = recipes.load("pytorch-mpich")
    arms = ["native", "docker"]
    d = plan.Design(arms, [CONFIG], repeats, warmups, 7, target)
    opts = plan.Options(steps=3, mpirun="mpirun-fake")
    runtimes = [Fake(a) for a in arms]
    return campaign.execute(recipe, "cpu", runtimes, d, tmp_path, opts, "c1", set(done), launcher)


def records(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "trials.jsonl").read_text().splitlines()]


def test_every_round_in_its_seeded_order_each_trial_recorded(tmp_path):
    launcher = Scripted()
    assert run(tmp_path, launcher) == "4 rounds done"
    d = plan.Design(["native", "docker"], [CONFIG], 3, 1, 7)
    planned = [p.runtime for r in range(4) for p in d.round(r)]
    assert [arm for arm, _, _ in launcher.started] == planned
    recs = records(tmp_path)
    assert [r["index"] for r in recs] == list(range(8))
    assert [r["warmup"] for r in recs] == [True, True] + [False] * 6
    assert {r["status"] for r in recs} == {"ok"}
    first = recs[0]
    assert first["runtime_settings"] == ["prepared"] and first["launcher"] == "mpirun"
    assert first["argv"] == ["fake", "kit-c1-0"] and first["mpirun"] == "fake MPI"
    assert first["image_digest"] == "sha256:f" and first["runtime_version"] == "fake 1"
    assert (first["schema"], first["steps"], first["warmup_steps"]) == ("kit.trial/2", 3, 5)


def test_resume_starts_only_the_trials_not_finished(tmp_path):
    launcher = Scripted()
    run(tmp_path, launcher, done={0, 1, 2, 5})
    assert [name for _, name, _ in launcher.started] == [f"kit-c1-{i}" for i in (3, 4, 6, 7)]


def test_a_resumed_campaign_counts_a_filed_null_wall_time_as_none(tmp_path):
    """The store files a wall time that was no JSON number as null (the schema allows it):
    resuming with such a trial on file runs the rest instead of failing on the sum."""
    run(tmp_path, Scripted(), repeats=1)
    first, *rest = (tmp_path / "trials.jsonl").read_text().splitlines()
    kept = json.dumps({**json.loads(first), "wall_s": None})
    (tmp_path / "trials.jsonl").write_text("\n".join([kept, *rest[:1]]) + "\n")
    launcher = Scripted()
    assert run(tmp_path, launcher, repeats=1, done={0, 1}) == "2 rounds done"
    assert [name for _, name, _ in launcher.started] == ["kit-c1-2", "kit-c1-3"]


def test_each_way_a_trial_ends_is_recorded_as_such(tmp_path):
    run(tmp_path, Scripted({1: "oom", 2: "failed", 3: "timeout"}))
    assert [r["status"] for r in records(tmp_path)][:5] == ["ok", "oom", "failed", "timeout", "ok"]
    failed = records(tmp_path)[2]
    assert failed["output_tail"] == "boom" and failed["log"] == "logs/kit-c1-2.log"
    assert (tmp_path / failed["log"]).read_text() == "first line\nboom"
    assert records(tmp_path)[0]["log"] == "" and len(list((tmp_path / "logs").iterdir())) == 3


def test_an_interrupted_trial_is_filed_then_the_campaign_stops(tmp_path):
    launcher = Scripted({2: "interrupted"})
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, launcher)
    assert [r["status"] for r in records(tmp_path)] == ["ok", "ok", "interrupted"]
    assert len(launcher.started) == 3


def test_a_precision_target_stops_once_every_interval_is_narrow(tmp_path):
    why = run(tmp_path, Scripted(), repeats=4, target=plan.Target(0.02, 3600))
    rounds = int(why.split(" after ")[1].split()[0])
    assert why.startswith("precision ±2.0% reached after ") and "(docker ±0." in why
    assert rounds >= 5 and len(records(tmp_path)) == 2 * rounds  # warm-up + repeats at least


class Watched(Scripted):
    """Its trials watched for 4 s, in which the machine was busy 6 CPU-seconds, 5 the
    trial's own."""

    def run(self, rt, prep, job, env, timeout, title) -> launchers.Launched:
        launched = super().run(rt, prep, job, env, timeout, title)
        window = hostload.Window(seconds=4.0, busy_s=6.0, own_s=5.0)
        return dataclasses.replace(
            launched, outcome=dataclasses.replace(launched.outcome, window=window)
        )


@pytest.mark.parametrize("elsewhere", [False, True])
def test_the_record_says_what_else_used_the_host_its_ranks_ran_on(tmp_path, monkeypatch, elsewhere):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    launcher = Watched()
    launcher.elsewhere = elsewhere  # Slurm, --hosts: the ranks ran on other machines
    run(tmp_path, launcher, repeats=1, warmups=0)
    load = records(tmp_path)[0]["host_load"]
    other = None if elsewhere else 12.5
    assert (load["busy_cpu_pct"], load["other_cpu_pct"], load["window_s"]) == (75.0, other, 4.0)


class Stepped(Scripted):
    """Every trial 0.5 s steps, 10 % apart, in 9.5 s of wall time: 8 s of fixed cost."""

    def run(self, rt, prep, job, env, timeout, title) -> launchers.Launched:
        launched = super().run(rt, prep, job, env, timeout, title)
        self.started[-1] = (rt.arm, job.program, None)
        o = launched.outcome
        result = {**o.result, "step_times_s": [0.45, 0.55, 0.45]}
        return launchers.Launched(launched.argv, outcomes.Outcome("ok", 0, 9.45, result, ""))


def test_min_time_auto_is_chosen_from_the_warm_up_round(tmp_path, capsys):
    """Warm-up trials time their steps only; the measured ones get the length that
    narrows the intervals most per minute, from the steps after the first (still warming):
    sqrt(8 s x 0.1^2 x 0.45 s) / 5 % = 3.8 s, to the half second 4 s. The summary says so."""
    launcher = Stepped()
    recipe = recipes.load("pytorch-mpich")
    d = plan.Design(["native", "docker"], [CONFIG], 2, 1, 7)
    opts = plan.Options(steps=3, mpirun="m", bench_args={"torch-cnn": []}, auto_min_time=True)
    why = campaign.execute(
        recipe, "cpu", [Fake("native"), Fake("docker")], d, tmp_path, opts, "c1", set(), launcher
    )
    argvs = [program for _, program, _ in launcher.started]
    assert all("--min-time" not in a for a in argvs[:2])
    assert all(a[a.index("--min-time") + 1] == "4" for a in argvs[2:])
    assert why.endswith(
        "; --min-time auto: 4 s (a launch's fixed cost 8.0 s, steps 0.45 s ±10%, "
        "launch spread 5% assumed)"
    )
    assert [r["bench_args"] for r in records(tmp_path)][2:] == [["--min-time", "4"]] * 4
    assert stats.trial_seconds(8.5, 0.45, 0.05, 0.05) == pytest.approx(1.96, abs=0.01)


def test_an_arm_with_no_trial_that_succeeded_is_named():
    recs = [
        record("native", 1.0),
        *(record("docker", 0.0, status=s) for s in ("failed", "timeout", "failed")),
        record("docker", 1.0, warmup=True),  # a warm-up that worked does not count
        record("podman", 0.0, status="oom"),  # out of memory is a result
    ]
    assert campaign.unsuccessful(typed(recs)) == ["docker (2 failed, 1 timeout)"]


def test_a_failed_run_exits_1_a_mistake_2(monkeypatch, capsys):
    def fails(_a):
        raise RunFailed("no trial of docker (3 failed) succeeded; ...")

    monkeypatch.setattr(cli, "cmd_presets", fails)
    assert cli.main(["presets"]) == 1
    assert capsys.readouterr().err == "kit: error: no trial of docker (3 failed) succeeded; ...\n"
    assert cli.main(["build", "nope"]) == 2


class LossNaN(Scripted):
    """Its third trial's benchmark says its loss was NaN (Python's json writes it)."""

    def run(self, rt, prep, job, env, timeout, title) -> launchers.Launched:
        launched = super().run(rt, prep, job, env, timeout, title)
        if len(self.started) == 3:
            o = launched.outcome
            result = {**o.result, "loss": [2.3, float("nan")]}
            return launchers.Launched(launched.argv, dataclasses.replace(o, result=result))
        return launched


def test_a_result_holding_nan_is_filed_failed_naming_it_and_the_campaign_goes_on(tmp_path):
    assert run(tmp_path, LossNaN()) == "4 rounds done"
    assert "NaN" not in (tmp_path / "trials.jsonl").read_text()
    recs = records(tmp_path)
    assert [r["status"] for r in recs] == ["ok", "ok", "failed", *["ok"] * 5]
    assert recs[2]["cause"] == "not a JSON number (filed as null): result.loss[1]"
    assert recs[2]["result"]["loss"] == [2.3, None]


def test_a_run_refused_before_its_first_trial_leaves_nothing_behind(tmp_path, monkeypatch):
    """A real run refused after a dry run passed (an engine not there, a runtime that
    cannot prepare) left campaign.json, an empty trials.jsonl and a lock behind: the next
    run there was told to --resume a campaign that never ran."""
    from types import SimpleNamespace

    from kit.core.errors import KitError
    from kit.run import start

    def refused(*_args) -> None:
        raise KitError("docker: no engine answers")

    monkeypatch.setattr(start.request, "prepare", lambda q, c, plan_only: c)
    monkeypatch.setattr(start.campaign, "execute", refused)
    checked = SimpleNamespace(spec={"runtimes": ["native"]}, recipe=None, variant="cpu",
                              runtimes=[], design=None, opts=None)  # fmt: skip
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine\n")
    for out in (tmp_path / "new", kept):
        q = SimpleNamespace(out=out, emit=None, dry_run=False, resume=False)
        with pytest.raises(KitError, match="no engine answers"):
            start.run(q, checked)
    assert not (tmp_path / "new").exists()
    assert [p.name for p in kept.iterdir()] == ["notes.txt"]


class Slow(Scripted):
    """Each trial takes 30 s by its record (no time passes), each timeout it was given kept."""

    def run(self, rt, prep, job, env, timeout, title) -> launchers.Launched:
        self.timeouts = [*getattr(self, "timeouts", []), timeout]
        launched = super().run(rt, prep, job, env, timeout, title)
        outcome = dataclasses.replace(launched.outcome, wall_s=30.0)
        return launchers.Launched(launched.argv, outcome)


def test_the_next_trial_starts_only_if_its_arms_times_say_it_ends_inside_the_budget(
    tmp_path, capsys
):
    """A 40 s budget on ResNet-50 took 106 s: the budget was checked between rounds only,
    and a trial's own timeout was the 600 s default whatever was left."""
    launcher = Slow()
    run(tmp_path, launcher, target=plan.Target(0.02, 40.0))
    assert len(launcher.started) == 1 and 0 < launcher.timeouts[0] <= 40.0
    assert "budget 0.67 min spent after 0 rounds (the next trial, native, takes about 30 s;" in (
        capsys.readouterr().err
    )
    roomy = Slow()
    with contextlib.suppress(RunFailed):  # whether an arm measured, the budget's to say
        run(tmp_path / "roomy", roomy, target=plan.Target(0.02, 125.0))
    assert len(roomy.started) == 4  # then a round of 60 s would end at 180
    assert [round(x) for x in roomy.timeouts] == [125, 95, 65, 35]  # what was left of it
