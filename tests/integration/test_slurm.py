"""Trials as Slurm batch jobs on the local two-node cluster (ci/provision starts it, one
slurmd in each of two network-namespace nodes: ranks on the two talk over TCP)."""

import json
import subprocess
from pathlib import Path

import kitschema
import pytest

from .conftest import kit, records, short_sweeps

pytestmark = pytest.mark.integration

RUNTIMES = "native,singularity,singularity-bind,charliecloud"
SITE = '[slurm]\ntasks_per_node = 1\ntime = "00:15:00"\n'  # two ranks: one on each node


def matrix(out, *extra: str) -> list[str]:
    return [
        *("run", "pytorch-mpich", "--runtime", RUNTIMES, "--bench", "torch-cnn,mpi"),
        *("--np", "2", "--repeats", "1", "--warmup-trials", "0", "--steps", "6"),
        *("--baseline-launches", "1"),  # one trial a runtime: the records are what is checked
        *("--out", str(out), *short_sweeps("mpi"), *extra),
    ]


def test_two_node_jobs_in_each_runtime_next_to_mpirun(built, cluster, tmp_path):
    site = tmp_path / "site.toml"
    site.write_text(SITE)
    batch, local = tmp_path / "slurm", tmp_path / "local"
    kit(*matrix(batch, "--launcher", "slurm", "--slurm-config", str(site)), timeout=3600)
    recs = records(batch)
    assert {(r["runtime"], r["bench"]) for r in recs} == {
        (rt, b) for rt in RUNTIMES.split(",") for b in ("torch-cnn", "mpi")
    }
    for r in recs:
        assert r["status"] == "ok", (r["runtime"], r["bench"], r["output_tail"][-2000:])
        assert kitschema.validate(r["result"]) == []
        assert r["launcher"] == "slurm" and r["slurm"]["job_id"].isdigit()
        assert r["slurm"]["nodes"] == "kit-n[1-2]"  # one rank on each node
        assert r["result"]["ranks"] == 2
        assert r["result"]["hosts"] == ["kitn1", "kitn2"]
        assert r["result"]["transport"] == "tcp over eth0", (r["runtime"], r["bench"])
    assert len({r["slurm"]["job_id"] for r in recs}) == len(recs)
    script = (batch / "slurm" / f"kit-{recs[0]['campaign']}-0.sbatch").read_text()
    assert "#SBATCH --nodes=2\n" in script and "srun --mpi=pmi2 " in script

    again = kit(*matrix(batch, "--launcher", "slurm", "--slurm-config", str(site), "--resume"))
    assert "0 of 8 trials to run" in again.stderr  # resume across jobs: nothing lost or redone

    kit(*matrix(local))
    text = kit("report", str(local), str(batch)).stdout
    rows = text.splitlines()
    for rt in RUNTIMES.split(","):  # a torch-cnn row per launcher (MPI rows start with the image)
        assert sum(row.startswith(f"| {rt} | 1 |") for row in rows) == 2
    steps = " · 6 steps after 5\n"  # the launcher and the step counts are in the group's key
    assert f"· 2 rank(s) · via slurm{steps}" in text and f"· 2 rank(s){steps}" in text


def test_emitted_script_runs_without_kit(built, cluster, tmp_path):
    site = tmp_path / "site.toml"
    site.write_text(SITE)
    emitted = tmp_path / "scripts"
    out = kit(
        *matrix(tmp_path / "unused", "--launcher", "slurm", "--slurm-config", str(site)),
        *("--emit", str(emitted)),
    )
    paths = [Path(p) for p in out.stdout.split()]
    assert len(paths) == 8 and not (tmp_path / "unused" / "trials.jsonl").exists()
    singularity_mpi = next(
        p for p in paths if "apptainer exec" in p.read_text() and "mpi_bench.py" in p.read_text()
    )
    run = subprocess.run(
        ["sbatch", "--wait", str(singularity_mpi)], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    output = singularity_mpi.with_suffix(".out").read_text()
    rec = json.loads(next(line for line in output.splitlines() if line.startswith("{")))
    assert kitschema.validate(rec) == [] and rec["ranks"] == 2 and rec["image"] == "pytorch-mpich"
