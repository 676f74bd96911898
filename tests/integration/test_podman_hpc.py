"""podman-hpc for real: the image migrated into its squashed store once per digest, both
rank models (a container per rank; shared-run, one container a node with the ranks
exec'd in) at 1 and 2 ranks with MPICH and with Open MPI, under mpirun, across the
namespace nodes and under Slurm, and the MPI module's ranks on the host's library. One step a
trial: these prove the paths; what each costs is a campaign's (docs/run.md)."""

import os
import subprocess
from pathlib import Path

import pytest

from .conftest import kit, records

pytestmark = pytest.mark.integration

MODELS = "podman-hpc,podman-hpc-shared"
SITE = '[slurm]\ntasks_per_node = 1\ntime = "00:15:00"\n'  # two ranks: one on each node
MAPS = "import mpi4py.MPI; print(*[x for x in open('/proc/self/maps') if 'libmpich' in x])"


def one_step(image: str, runtimes: str, out: Path, *extra: str, np: str = "1,2") -> list[dict]:
    """One trial of torch-cnn (tiny, one step) in each arm at each rank count: the records,
    each of which must be ok (a failed one's output tail is said)."""
    done = kit(
        *("run", image, "--runtime", runtimes, "--bench", "torch-cnn", "--np", np),
        *("--model", "tiny", "--batch-size", "8", "--steps", "1", "--warmup-steps", "0"),
        *("--repeats", "1", "--warmup-trials", "0", "--baseline-launches", "1"),
        *("--timeout", "300", "--out", str(out), *extra),
        timeout=1800,
    )
    recs = [r for r in records(out) if r["runtime"] != "native"]
    for r in recs:
        assert r["status"] == "ok", (r["runtime"], r["ranks"], r["output_tail"][-3000:])
    assert recs, done.stderr
    return recs


def test_both_models_locally_with_mpich_and_the_host_mpi_module(built, tmp_path):
    """At 1 and 2 ranks under the host's mpirun: each record names its model and
    podman-hpc's version; the migration happened once; the MPI module's ranks map the
    host's libmpich, bound in, not the image's."""
    arms = f"{MODELS},podman-hpc@mpi"
    out = tmp_path / "run"
    recs = one_step("pytorch-mpich", arms, out, "--runtime-arg", "podman-hpc@mpi:--mpi")
    assert sorted((r["runtime"], r["ranks"]) for r in recs) == sorted(
        (a, n) for a in arms.split(",") for n in (1, 2)
    )
    for r in recs:
        assert r["runtime_version"].startswith("Podman-HPC Version: 1.2.2"), r["runtime_version"]
        assert r["launcher"] == ("mpirun" if r["ranks"] == 2 else "plain")
        assert r["result"]["ranks"] == r["ranks"]
        model = "shared-run" if r["runtime"] == "podman-hpc-shared" else "run"
        assert r["argv"][r["argv"].index("podman-hpc") + 1] == model
    shared = next(r for r in recs if r["runtime"] == "podman-hpc-shared")
    assert "podman-hpc shared-run" in shared["runtime_settings"][-1]

    bound = next(r for r in recs if r["runtime"] == "podman-hpc@mpi" and r["ranks"] == 2)
    argv = bound["argv"]
    assert "--mpi" in argv
    start = argv.index("podman-hpc")
    prefix = argv[start : argv.index(bound["image_ref"], start) + 1]
    cache = Path(os.environ.get("KIT_CACHE") or Path.home() / ".cache" / "kit")
    site = cache / "podman-hpc"
    env = {
        **os.environ,
        "PODMANHPC_CONFIG_FILE": str(site / "podman_hpc.yaml"),
        "SQUASH_DIR": str(site / "squash"),
        "CONTAINERS_CONF": str(site / "containers.conf"),
    }
    maps = subprocess.run(
        [*prefix, "/opt/kit/venv/bin/python", "-c", MAPS],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert maps.returncode == 0, maps.stderr[-2000:]
    assert "/opt/kit/host-mpi/libmpich.so.12" in maps.stdout, maps.stdout


def test_an_unchanged_image_is_not_migrated_again(built, tmp_path):
    """kit convert's squashfs of the same digest is reused: a second run migrates nothing."""
    again = kit(
        *("run", "pytorch-mpich", "--runtime", "podman-hpc", "--np", "1", "--model", "tiny"),
        *("--batch-size", "8", "--steps", "1", "--warmup-steps", "0", "--repeats", "1"),
        *("--warmup-trials", "0", "--baseline-launches", "1", "--out", str(tmp_path / "a")),
    )
    assert "migrated (cached for sha256:" in again.stderr, again.stderr[-2000:]


def test_both_models_across_the_namespace_nodes(built, tmp_path):
    """--hosts kitn1,kitn2: a rank on each node, each node's own Podman under podman-hpc."""
    up = subprocess.run(["ssh", "-o", "BatchMode=yes", "kitn2", "hostname"], capture_output=True)
    if up.stdout.strip() != b"kitn2":
        pytest.fail("the test nodes are not up: as root, ci/nodes up 3 --lacking-images kitn3")
    recs = one_step("pytorch-mpich", MODELS, tmp_path / "run", "--hosts", "kitn1,kitn2", np="2")
    for r in recs:
        assert r["result"]["hosts"] == ["kitn1", "kitn2"], r["runtime"]
        assert r["result"]["transport"] == "tcp over eth0", r["runtime"]


def test_both_models_under_slurm(built, cluster, tmp_path):
    """Two-node Slurm jobs: srun --mpi=pmi2 starts each rank's podman-hpc."""
    site = tmp_path / "site.toml"
    site.write_text(SITE)
    extra = ("--launcher", "slurm", "--slurm-config", str(site))
    recs = one_step("pytorch-mpich", MODELS, tmp_path / "run", *extra, np="2")
    for r in recs:
        assert r["launcher"] == "slurm" and r["slurm"]["nodes"] == "kit-n[1-2]"
        assert r["result"]["hosts"] == ["kitn1", "kitn2"], r["runtime"]


def test_open_mpi_in_both_models_locally_across_the_nodes_and_under_slurm(
    openmpi, cluster, tmp_path
):
    """Open MPI's ranks, root inside, reach mpirun's PMIx server (its uid check off for
    the job: PMIX_MCA_psec=none, for the daemons on the other hosts too) in each model:
    1 and 2 ranks under the host's mpirun, a rank on each namespace node over ssh, and a
    two-node Slurm job's mpirun."""
    local = one_step("pytorch2-openmpi", MODELS, tmp_path / "local")
    assert sorted((r["runtime"], r["ranks"]) for r in local) == sorted(
        (a, n) for a in MODELS.split(",") for n in (1, 2)
    )
    site = tmp_path / "site.toml"
    site.write_text(SITE)
    spread = [
        *one_step("pytorch2-openmpi", MODELS, tmp_path / "hosts", "--hosts", "kitn1,kitn2", np="2"),
        *one_step("pytorch2-openmpi", MODELS, tmp_path / "slurm", "--launcher", "slurm",
                  "--slurm-config", str(site), np="2"),
    ]  # fmt: skip
    assert sorted(r["launcher"] for r in spread) == ["mpirun over ssh"] * 2 + ["slurm"] * 2
    for r in [*local, *spread]:
        assert r["result"]["mpi_library"].startswith("Open MPI v4.1"), r["runtime"]
        assert r["result"]["ranks"] == r["ranks"]
        assert any(x.startswith("Open MPI: PMIX_MCA_psec=none") for x in r["runtime_settings"])
    for r in spread:
        assert r["result"]["hosts"] == ["kitn1", "kitn2"], (r["runtime"], r["launcher"])
