"""The Open MPI images at 1 and 2 ranks under every runtime, locally and as Slurm jobs.

Open MPI differs from MPICH where containers bite: its shared-memory transport
(vader) uses cross-memory attach for large messages, which spins forever across
the user namespaces of Apptainer and Charliecloud unless kit's fair setting turns
it off, and under Slurm its own mpirun starts the ranks inside the allocation.
"""

import kitschema
import pytest

from .conftest import kit, leftovers, records, short_sweeps
from .test_benchmarks import campaign, check, check_sweep
from .test_slurm import SITE

pytestmark = pytest.mark.integration

RUNTIMES = "native,docker,singularity,charliecloud"
MIB4 = 4 << 20


def matrix(runtimes: str, out, *extra: str, sane: bool = True) -> list[dict]:
    kit(
        *("run", "pytorch2-openmpi", "--runtime", runtimes, "--bench", "torch-cnn,mpi"),
        *("--np", "2", "--repeats", "1", "--warmup-trials", "0", "--steps", "6"),
        *("--baseline-launches", "1"),  # one trial a runtime: the records are what is checked
        *("--timeout", "180", "--out", str(out), *short_sweeps("mpi"), *extra),
        timeout=3600,
    )
    recs = records(out)
    assert {(r["runtime"], r["bench"]) for r in recs} == {
        (rt, b) for rt in runtimes.split(",") for b in ("torch-cnn", "mpi")
    }
    for r in recs:
        assert r["status"] == "ok", (r["runtime"], r["bench"], r["output_tail"][-2000:])
        assert kitschema.validate(r["result"]) == []
        assert r["result"]["ranks"] == 2
        assert r["result"]["mpi_library"].startswith("Open MPI v4.1")
        if r["bench"] == "mpi":
            if sane:
                check_sweep(r["result"])
            assert r["result"]["p2p"][-1]["bytes"] == MIB4
            assert all(row["bandwidth_mb_s"] > 0 for row in r["result"]["p2p"])
    return recs


def test_every_runtime_two_ranks_and_the_sweep_reaches_4_mib(openmpi, tmp_path):
    recs = matrix(RUNTIMES, tmp_path / "local")
    hybrid = [r for r in recs if r["runtime"] in ("singularity", "charliecloud")]
    assert all(
        "OMPI_MCA_btl_vader_single_copy_mechanism=none" in " ".join(r["runtime_settings"])
        for r in hybrid
    )
    assert leftovers() == []
    table = kit("report", str(tmp_path / "local")).stdout
    rows = [x for x in table.splitlines() if x.startswith("| pytorch2-openmpi | 2 | local |")]
    cells = [x.split(" | ") for x in rows]  # image, ranks, launcher, transport, runtime, n, bytes
    at_4mib = {c[4] for c in cells if c[3] == "one host" and c[6] == str(MIB4)}
    assert at_4mib == set(RUNTIMES.split(","))  # bandwidth at 4 MiB for each runtime


def test_slurm_jobs_start_open_mpi_ranks_with_its_own_mpirun(openmpi, cluster, tmp_path):
    site = tmp_path / "site.toml"
    site.write_text(SITE)
    runtimes = "native,singularity,charliecloud"
    # Across the two Slurm nodes (of one host) Open MPI talks TCP: measured here, small
    # messages take milliseconds, so the sweep's shape is not checked, only its reach.
    recs = matrix(
        runtimes, tmp_path / "slurm", "--launcher", "slurm", "--slurm-config", str(site), sane=False
    )
    for r in recs:
        assert r["launcher"] == "slurm" and r["slurm"]["nodes"] == "kit-n[1-2]"
        assert r["result"]["hosts"] == ["kitn1", "kitn2"], r["runtime"]
        assert r["result"]["transport"] == "tcp over eth0", r["runtime"]
    script = (tmp_path / "slurm" / "slurm" / f"kit-{recs[0]['campaign']}-0.sbatch").read_text()
    assert "mpirun.openmpi -np 2 " in script and "srun --mpi" not in script


def test_todays_stack_with_open_mpi_natively_and_in_every_runtime(openmpi, tf2_openmpi, tmp_path):
    """The Open MPI flavours of today's images: DDP and MultiWorkerMirroredStrategy at 1 and
    2 ranks natively and in every runtime, Open MPI loaded by every rank, weights in sync."""
    every = "native,docker,podman,singularity,charliecloud"
    recs = campaign("pytorch2-openmpi", every, "torch-cnn", tmp_path / "torch")
    check(recs, every, "torch-cnn")
    tf = campaign("tf2-openmpi", every, "tf-mwms", tmp_path / "tf")
    check(tf, every, "tf-mwms")
    assert all(r["result"]["mpi_library"].startswith("Open MPI v4.1") for r in recs + tf)
    assert all(r["result"]["weights_in_sync"] for r in recs + tf)
