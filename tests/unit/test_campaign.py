"""Campaign bookkeeping: the plan, and what --resume runs again."""

import json

import pytest

from kit import campaign, results
from kit.errors import KitError

SPEC = {"image": "pytorch-mpich", "runtimes": ["native", "docker"], "repeats": 2, "seed": 0}


def test_plan_interleaves_every_round_and_is_seeded():
    configs = [campaign.Config("torch-cnn", "tiny", 32, n) for n in (1, 2)]
    p = campaign.plan(["native", "docker", "singularity"], configs, repeats=3, warmups=1, seed=5)
    assert len(p) == 4 * 6
    for r in range(4):
        block = p[r * 6 : (r + 1) * 6]
        assert {(t.runtime, t.config.ranks) for t in block} == {
            (rt, n) for rt in ("native", "docker", "singularity") for n in (1, 2)
        }
        assert all(t.warmup == (r == 0) and t.repeat == r - 1 for t in block)
    assert p == campaign.plan(["native", "docker", "singularity"], configs, 3, 1, 5)
    assert p != campaign.plan(["native", "docker", "singularity"], configs, 3, 1, 6)


def test_new_campaign_writes_its_spec(tmp_path):
    cid, done = campaign.start(tmp_path / "c", SPEC, resume=False)
    saved = json.loads((tmp_path / "c" / campaign.SPEC_FILE).read_text())
    assert saved == {"campaign": cid, **SPEC} and done == set()


def test_resume_skips_finished_and_reruns_cut_trials(tmp_path):
    cid, _ = campaign.start(tmp_path, SPEC, resume=False)
    for i, status in enumerate(["ok", "failed", "timeout", "interrupted", "ok"]):
        results.append(tmp_path, {"campaign": cid, "index": i, "status": status})
    results.append(tmp_path, {"campaign": "other", "index": 7, "status": "ok"})
    assert campaign.start(tmp_path, SPEC, resume=True) == (cid, {0, 1, 4})


def test_refuses_to_mix_or_change_campaigns(tmp_path):
    campaign.start(tmp_path, SPEC, resume=False)
    results.append(tmp_path, {"campaign": "x", "index": 0, "status": "ok"})
    with pytest.raises(KitError, match=r"already holds trials; pass --resume"):
        campaign.start(tmp_path, SPEC, resume=False)
    with pytest.raises(KitError, match=r"these differ from .*campaign\.json: repeats, seed"):
        campaign.start(tmp_path, {**SPEC, "repeats": 3, "seed": 1}, resume=True)
    with pytest.raises(KitError, match="nothing to resume"):
        campaign.start(tmp_path / "empty", SPEC, resume=True)
