"""Campaign bookkeeping: the plan, and what --resume runs again."""

import importlib.util
import json
import sys

import pytest

from kit import cli
from kit.analysis import summary
from kit.core import benches, paths
from kit.core.errors import KitError
from kit.results import store
from kit.run import plan, request

from ..records import record, typed

SPEC = {"image": "pytorch-mpich", "runtimes": ["native", "docker"], "repeats": 2, "seed": 0}


def test_plan_interleaves_every_round_and_is_seeded():
    configs = [plan.Config("torch-cnn", "tiny", 32, n) for n in (1, 2)]
    p = plan.Design(["native", "docker", "singularity"], configs, 3, 1, 5).trials()
    assert len(p) == 4 * 6
    for r in range(4):
        block = p[r * 6 : (r + 1) * 6]
        assert {(t.runtime, t.config.ranks) for t in block} == {
            (rt, n) for rt in ("native", "docker", "singularity") for n in (1, 2)
        }
        assert all(t.warmup == (r == 0) and t.repeat == r - 1 for t in block)
    assert p == plan.Design(["native", "docker", "singularity"], configs, 3, 1, 5).trials()
    assert p != plan.Design(["native", "docker", "singularity"], configs, 3, 1, 6).trials()


def test_new_campaign_writes_its_spec(tmp_path):
    cid, done = store.open_campaign(tmp_path / "c", SPEC, resume=False)
    saved = json.loads((tmp_path / "c" / store.SPEC_FILE).read_text())
    assert saved == {"campaign": cid, **SPEC} and done == set()


def test_resume_skips_finished_and_reruns_cut_trials(tmp_path):
    cid, _ = store.open_campaign(tmp_path, SPEC, resume=False)
    for i, status in enumerate(["ok", "failed", "timeout", "interrupted", "ok"]):
        store.append(tmp_path, record("native", 1.0, campaign=cid, index=i, status=status))
    store.append(tmp_path, record("native", 1.0, campaign="other", index=7))
    assert store.open_campaign(tmp_path, SPEC, resume=True) == (cid, {0, 1, 4})


def test_refuses_to_mix_or_change_campaigns(tmp_path):
    store.open_campaign(tmp_path, SPEC, resume=False)
    store.append(tmp_path, record("native", 1.0, campaign="x"))
    with pytest.raises(KitError, match=r"already holds trials; pass --resume"):
        store.open_campaign(tmp_path, SPEC, resume=False)
    with pytest.raises(KitError, match=r"these differ from .*campaign\.json: repeats, seed"):
        store.open_campaign(tmp_path, {**SPEC, "repeats": 3, "seed": 1}, resume=True)
    with pytest.raises(KitError, match="nothing to resume"):
        store.open_campaign(tmp_path / "empty", SPEC, resume=True)


def test_configs_product_and_mpi_sweep_takes_ranks_only():
    got = plan.configs(
        ["torch-cnn", "mpi"], ["tiny", "resnet50"], [8, 16], [1, 2], ["synthetic", "real"]
    )
    assert len(got) == 2 * 2 * 2 * 2 + 2
    assert [c for c in got if c.bench == "mpi"] == [
        plan.Config("mpi", "-", 0, 1),
        plan.Config("mpi", "-", 0, 2),
    ]


def test_bench_args_go_to_every_benchmark_or_the_one_named():
    a = cli.parser().parse_args(
        ["run", "horovod-mpich", "--bench", "tf-cnn,mpi", "--min-time", "2", "--dry-run",
         "--bench-arg=--x=1", "--bench-arg=mpi:--max-bytes=64", "--bench-arg=a:b"]
    )  # fmt: skip
    c = request.check(request.RunRequest.of(a))
    assert c.opts.bench_args == {
        "tf-cnn": ["--x=1", "a:b", "--min-time", "2"],  # a sweep has no steps to lengthen
        "mpi": ["--x=1", "--max-bytes=64", "a:b"],
    }


def test_declared_models_are_the_benchmarks_own():
    """The plan is checked against each spec; the scripts build exactly those models."""
    for spec in benches.BENCHES.values():
        script = paths.repo_root() / "benchmarks" / spec.script
        loader = importlib.util.spec_from_file_location(f"kit_bench_{script.stem}", script)
        module = importlib.util.module_from_spec(loader)
        sys.path.insert(0, str(script.parent))
        try:
            loader.loader.exec_module(module)
        finally:
            sys.path.remove(str(script.parent))
        assert spec.models == tuple(getattr(module, "MODELS", {})), spec.name


def test_a_lower_is_better_metric_needs_only_its_spec(monkeypatch):
    """A latency benchmark: compared on its own metric, a higher figure is slower."""
    spec = benches.Bench(
        "lat",
        "lat.py",
        "latency",
        {"latency_ms": (float, "ms per request")},
        benches.Metric("latency_ms", "ms", False),
    )
    monkeypatch.setitem(benches.BENCHES, "lat", spec)
    recs = [
        record(rt, 0, bench="lat", repeat=i, index=2 * i + k, campaign="c",
               result={"latency_ms": ms * (1 + 0.01 * (i % 3)), "startup_s": 1.0,
                       "framework_version": "1", "mpi_library": "m"})
        for i in range(8) for k, (rt, ms) in enumerate((("native", 10.0), ("docker", 12.0)))
    ]  # fmt: skip
    assert all(store.shape_problem(r) is None for r in recs)
    arm = next(a for g in summary.summarise(typed(recs), "").groups for a in g.arms if a.ratio)
    assert arm.ratio.value == pytest.approx(1.2, rel=0.02) and arm.verdict == "slower"
