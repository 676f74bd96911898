"""Across nodes for real: ranks on two network-namespace nodes (ci/nodes: each its own
network stack, address, host name, /dev/shm, sshd and Podman), started over ssh by kit
run --hosts in the hybrid runtimes and Podman, with every failure before the first trial
one line."""

import subprocess
from pathlib import Path

import pytest

from .conftest import kit, records

pytestmark = pytest.mark.integration

NODES = "kitn1,kitn2"
HYBRID = "native,singularity,charliecloud"


@pytest.fixture(scope="module", autouse=True)
def nodes(ready) -> None:
    up = subprocess.run(["ssh", "-o", "BatchMode=yes", "kitn2", "hostname"], capture_output=True)
    if up.stdout.strip() != b"kitn2":
        pytest.fail("the test nodes are not up: as root, ci/nodes up 3 --lacking-images kitn3")


def across(
    image: str,
    benches: str,
    out: Path,
    *extra: str,
    hosts: list[str] | None = ["--hosts", NODES],  # noqa: B006 (never changed)
    runtimes: str = HYBRID,
) -> list[dict]:
    """One trial of each benchmark and runtime at 2 ranks, over the host list (or, with
    hosts=None, as extra's launcher places them)."""
    kit(
        *("run", image, "--runtime", runtimes, "--bench", benches, *(hosts or ())),
        *("--np", "2", "--model", "tiny", "--batch-size", "8", "--steps", "5"),
        *("--warmup-steps", "1", "--repeats", "1", "--warmup-trials", "0"),
        *("--baseline-launches", "1", "--timeout", "240", "--out", str(out), *extra),
        timeout=1800,
    )
    return records(out)


def check(recs: list[dict], benches: str, runtimes: str) -> None:
    """Each benchmark ran in each runtime, every rank on its own node, bytes over TCP
    between them: the records say so (a failed trial's whole output is in its log)."""
    assert sorted((r["bench"], r["runtime"]) for r in recs) == sorted(
        (b, rt) for b in benches.split(",") for rt in runtimes.split(",")
    )
    for r in recs:
        res = r["result"] or {}
        where = (r["runtime"], r["bench"], r["log"] and Path(r["log"]).name, r["output_tail"])
        assert r["status"] == "ok", where
        assert (r["launcher"], r["host_list"]) == ("mpirun over ssh", ["kitn1", "kitn2"])
        assert res["hosts"] == ["kitn1", "kitn2"], where
        assert res["transport"] == "tcp over eth0", where
        if r["bench"] in ("tf-cnn", "torch-cnn"):
            assert res["weights_in_sync"], where


def test_ddp_horovod_and_the_mpi_sweep_across_two_nodes(pytorch2, horovod, tmp_path):
    """DDP and the sweep in the hybrid runtimes, the bind model and Podman (each node's own,
    a container per rank), leaving no container behind on either node; Horovod from a
    host file."""
    runtimes = f"{HYBRID},singularity-bind,podman"
    recs = across("pytorch2-mpich", "torch-cnn,mpi", tmp_path / "torch", "--bench-arg",
                  "mpi:--time-per-size=0.05", runtimes=runtimes)  # fmt: skip
    check(recs, "torch-cnn,mpi", runtimes)
    bind = [r for r in recs if r["runtime"] == "singularity-bind"]
    assert all("injected: " in " ".join(r["runtime_settings"]) for r in bind)
    hostfile = tmp_path / "nodes.txt"
    hostfile.write_text("# the test's nodes\nkitn1\nkitn2:1  # MPICH's slot count, ignored\n")
    hosts = ["--hostfile", str(hostfile)]
    recs = across("horovod-mpich", "tf-cnn", tmp_path / "horovod", hosts=hosts)
    check(recs, "tf-cnn", HYBRID)
    for node in ("kitn1", "kitn2"):
        left = subprocess.run(
            ["ssh", "-o", "BatchMode=yes", node, "podman", "ps", "--all", "--quiet"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert left == "", (node, left)


def test_open_mpi_ranks_across_two_nodes(openmpi, tmp_path):
    """Open MPI's own launcher over the host list (mpirun -H, its daemons over ssh), its
    TCP transport kept to the nodes' network."""
    recs = across("pytorch2-openmpi", "torch-cnn,mpi", tmp_path / "run", "--bench-arg",
                  "mpi:--time-per-size=0.05")  # fmt: skip
    check(recs, "torch-cnn,mpi", HYBRID)
    assert all(r["result"]["mpi_library"].startswith("Open MPI v4.1") for r in recs)


def test_horovod_under_slurm_across_the_nodes(horovod, cluster, tmp_path):
    """tf-cnn (Horovod over MPI) as two-node Slurm jobs: a rank in each node's slurmd."""
    site = tmp_path / "site.toml"
    site.write_text('[slurm]\ntasks_per_node = 1\ntime = "00:15:00"\n')
    recs = across(
        "horovod-mpich", "tf-cnn", tmp_path / "slurm", "--launcher", "slurm",
        "--slurm-config", str(site), hosts=None,
    )  # fmt: skip
    assert sorted(r["runtime"] for r in recs) == sorted(HYBRID.split(","))
    for r in recs:
        res = r["result"] or {}
        assert r["status"] == "ok", (r["runtime"], r["output_tail"][-3000:])
        assert (r["launcher"], r["slurm"]["nodes"]) == ("slurm", "kit-n[1-2]")
        assert res["hosts"] == ["kitn1", "kitn2"] and res["transport"] == "tcp over eth0"
        assert res["weights_in_sync"]


def test_a_host_that_fails_is_one_line_before_the_first_trial(pytorch2, tmp_path):
    """An unknown host, a host key ssh does not know (the node's bare address), a node
    without the image's conversion (kitn3), and Docker where the nodes share the host's
    engine (whose containers would run in its namespaces, not the nodes')."""
    for hosts, runtime, said in (
        ("kitn1,kitn9", "native", "host 'kitn9' cannot be reached over ssh (ssh: Could not "
         "resolve hostname kitn9"),
        ("kitn1,10.77.0.2", "native", "host '10.77.0.2': ssh does not accept its host key "
         "(Host key verification failed.)"),
        ("kitn1,kitn3", "singularity", "host 'kitn3' lacks what runtime 'singularity' runs "
         "here"),
        ("kitn1,kitn2", "docker", "runtime 'docker' under --hosts needs an engine on each "
         "host; 'kitn1' and 'kitn2' answer from the same one ("),
    ):  # fmt: skip
        out = tmp_path / hosts
        p = kit(
            *("run", "pytorch2-mpich", "--hosts", hosts, "--runtime", runtime, "--bench", "mpi"),
            *("--np", "2", "--repeats", "1", "--warmup-trials", "0", "--out", str(out)),
            check=False,
        )
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and lines[-1].startswith(f"kit: error: {said}"), p.stderr
        assert not (out / "trials.jsonl").exists() or not (out / "trials.jsonl").read_text()
