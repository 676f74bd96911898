"""A valid trial record for unit tests, with the fields the results reader requires."""

import copy

from kit.results import record as trial_record

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
