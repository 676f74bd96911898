"""A valid trial record for unit tests, with the fields the results reader requires, as
a line holds it (record) or as kit reads it (typed)."""

import copy
import json
import math
import random
from datetime import datetime, timedelta
from pathlib import Path

from kit.results import record as trial_record
from kit.results import store
from kit.results.record import Trial

BASE = {
    "schema": trial_record.SCHEMA,
    "campaign": "c0",
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


def record(runtime: str, rate: float, startup: float = 1.0, **kw) -> dict:
    r = copy.deepcopy(BASE) | {"runtime": runtime} | kw
    if "result" not in kw:
        r["result"] = {
            "images_per_sec": rate,
            "startup_s": startup,
            "framework_version": "1.13",
            "mpi_library": "MPICH 4.0.2",
        }
    return r


def typed(records: list[dict]) -> list[Trial]:
    """Records as the store reads them (Trial.from_json: a field left out is unknown), for
    what takes trials: the analysis, the stop rule."""
    return [Trial.from_json(r) for r in records]


def campaign_folder(
    out: Path,
    cid: str,
    rounds: int,
    factors: dict[str, float],
    seed: int = 0,
    noise: float = 0.03,
    started: str = "2026-11-01T10:00:00+00:00",
    host: str = "nodeA",
    **kw,
) -> Path:
    """A finished campaign's folder as kit run leaves it (campaign.json, trials.jsonl):
    every arm once a round, at 100 x its factor x the round's drift x its own launch noise
    (seeded); kw goes into every record (e.g. steps, runtime_version)."""
    rng = random.Random(seed)
    t0 = datetime.fromisoformat(started)
    out.mkdir(parents=True, exist_ok=True)
    (out / store.SPEC_FILE).write_text(json.dumps({"campaign": cid, "runtimes": list(factors)}))
    lines = []
    for rnd in range(rounds):
        drift = rng.gauss(0, 0.02)
        for arm, factor in factors.items():
            i = len(lines)
            rate = 100 * factor * math.exp(drift + rng.gauss(0, noise))
            when = (t0 + timedelta(seconds=30 * i)).isoformat()
            where = {**BASE["host"], "hostname": host}
            r = record(arm, rate, campaign=cid, index=i, repeat=rnd, started=when, host=where)
            r |= {"wall_s": 25.0, **kw}
            lines.append(json.dumps(r, sort_keys=True) + "\n")
    (out / store.FILE).write_text("".join(lines))
    return out
