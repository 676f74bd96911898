"""podman-hpc: the exact command lines of both rank models, the site configuration kit
writes, and the migration into the squash store, once per image digest."""

import json
import os
import sys
from pathlib import Path

import pytest

from kit import runtimes
from kit.core.errors import KitError
from kit.image import convert
from kit.runtimes import Job, Prepared, podman_hpc
from kit.runtimes.base import WORKLOAD_PREFIXES

PROG = ["/opt/kit/venv/bin/python", "/opt/kit/benchmarks/torch_cnn.py", "--steps", "5"]
ENV = ["-e", "PMI_FD", "-e", "PMI_RANK", "-e", "OMPI_*", "-e", "PMIX_*"]
RANK = [
    "--rm", "--label=kit.trial=kit-abc-3", "--network=host", "--ipc=host", "--pid=host",
    "-e", "HOME=/tmp", "-e", "KIT_TRIAL", *ENV, "--env=PMI_SIZE=2",
    "-e", "PMI_PORT", "-e", "PMI_ID", "-e", "MPI_LOCALNRANKS", "-e", "MPI_LOCALRANKID",
    "-e", "MPIR_CVAR_CH3_INTERFACE_HOSTNAME",
    "--env=UCX_POSIX_USE_PROC_LINK=n", "--env=UCX_TLS=^cma",
    "--env=OMPI_MCA_btl_vader_single_copy_mechanism=none",
    "--volume=/data/set:/data/set",
]  # fmt: skip


@pytest.fixture
def prep(monkeypatch):
    for k in os.environ:
        if k.startswith(WORKLOAD_PREFIXES):
            monkeypatch.delenv(k)
    return Prepared("localhost/kit/x:1", "sha256:0", PROG[0], "/opt/kit/benchmarks")


def job(ranks: int = 2) -> Job:
    return Job(PROG, ranks, "mpirun.mpich", "kit-abc-3", ["--cpus=1.5"], ("/data/set",))


def test_one_container_per_rank(prep):
    """The host's mpirun starts a `podman-hpc run` per rank, given Hydra's PMI socket
    (podman-hpc passes it in as fd 3)."""
    rt = runtimes.get("podman-hpc")
    assert rt.command(prep, job()) == [
        "mpirun.mpich", "-np", "2", "podman-hpc", "run", *RANK,
        "--cpus=1.5", "localhost/kit/x:1", *PROG,
    ]  # fmt: skip
    assert (rt.launcher(2), rt.ranks_inside, rt.host_list) == ("mpirun", False, True)


def test_shared_run_one_container_per_node(prep):
    rt = runtimes.get("podman-hpc-shared")
    assert rt.command(prep, job())[:5] == [
        "mpirun.mpich", "-np", "2", "podman-hpc", "shared-run",
    ]  # fmt: skip
    assert rt.command(prep, job())[5:] == [*RANK, "--cpus=1.5", "localhost/kit/x:1", *PROG]
    assert "shared-run" in rt.settings[-1]


def test_shared_run_under_srun_reads_slurms_local_rank(prep):
    """shared-run lets a node's first rank start the container: under srun that is
    SLURM_LOCALID, under mpirun in the allocation the flavour's (the Prepared's env)."""
    rt = runtimes.get("podman-hpc-shared")
    srun = ["srun", "--mpi=pmi2"]
    step = rt.slurm_step(prep, job(), None, srun)
    assert step[:5] == [
        "srun", "--mpi=pmi2", "env",
        "PODMANHPC_LOCALID_VAR=SLURM_LOCALID",
        "PODMANHPC_TASKS_PER_NODE_VAR=SLURM_STEP_TASKS_PER_NODE",
    ]  # fmt: skip
    assert step[5:7] == ["podman-hpc", "shared-run"]
    mpirun = ["mpirun", "-np", "2"]
    assert rt.slurm_step(prep, job(), None, mpirun)[3:5] == ["podman-hpc", "shared-run"]
    assert runtimes.get("podman-hpc").slurm_step(prep, job(), None, srun)[2:4] == [
        "podman-hpc",
        "run",
    ]


def test_site_configuration(tmp_path):
    """Graph and squash store in the given folder, host networking, the MPI module binding
    the staged host library first on LD_LIBRARY_PATH, the GPU module declared."""
    made = podman_hpc.site_files(tmp_path, "/c/host-mpi/ab/libmpich.so.12.2.0")
    files = {Path(k).relative_to(tmp_path).as_posix(): v for k, v in made.items()}
    site = json.loads(files["podman_hpc.yaml"])
    assert site["graph_root"] == str(tmp_path / "graph")
    assert site["modules_dir"] == str(tmp_path / "modules.d")
    assert site["shared_run_exec_args"][:4] == ["-e", "PMI_*", "-e", "MPI_LOCAL*"]
    assert files["containers.conf"] == '[containers]\nnetns = "host"\n'
    mpi = json.loads(files["modules.d/mpich.yaml"])
    assert (mpi["cli_arg"], mpi["additional_args"]) == ("mpi", [
        "--volume=/c/host-mpi/ab/libmpich.so.12.2.0:/opt/kit/host-mpi/libmpich.so.12:ro",
        "--env=LD_LIBRARY_PATH=/opt/kit/host-mpi",
    ])  # fmt: skip
    gpu = json.loads(files["modules.d/gpu.yaml"])
    assert (gpu["cli_arg"], gpu["additional_args"][0]) == ("gpu", "--device=nvidia.com/gpu=all")
    assert "mpich.yaml" not in {Path(k).name for k in podman_hpc.site_files(tmp_path, None)}
    env = dict(podman_hpc.site_env(tmp_path))
    assert env["SQUASH_DIR"] == str(tmp_path / "squash")
    assert env["PODMANHPC_CONFIG_FILE"] == str(tmp_path / "podman_hpc.yaml")


def test_the_gpu_module_is_a_cuda_variants_option(prep):
    rt = runtimes.get("podman-hpc")
    assert rt.with_gpus(prep, "550.54").options == ("--gpu",)


FAKE = """#!{python}
import json, os, pathlib, sys
e = os.environ
with open({calls!r}, "a") as f:
    print(*sys.argv[1:], file=f)
g, sq = pathlib.Path(e["G"]), pathlib.Path(e["SQUASH_DIR"])
if sys.argv[1] == "load":  # the graph store gets the image, its top layer and the layer's link
    (g / "overlay-images").mkdir(parents=True, exist_ok=True)
    (g / "overlay" / e["TOP"]).mkdir(parents=True, exist_ok=True)
    record = {{"id": e["ID"], "layer": e["TOP"], "names": []}}
    (g / "overlay-images" / "images.json").write_text(json.dumps([record]))
    (g / "overlay" / e["TOP"] / "link").write_text("LINK" + e["TOP"])
if sys.argv[1] == "migrate" and (sq / "overlay" / "l" / f"LINK{{e['TOP']}}.squash").exists():
    (sq / "overlay-images").mkdir(parents=True, exist_ok=True)
    new = {{"id": e["ID"], "layer": e["TOP"], "names": [sys.argv[2]]}}
    old = {{"id": e["OLD"], "layer": e["OLDTOP"], "names": []}}  # migrate untags it
    (sq / "overlay-images" / "images.json").write_text(json.dumps([new, old]))
"""


def test_migrates_once_per_digest_and_again_when_the_image_changes(tmp_path, monkeypatch):
    """kit's squashfs is linked where migrate looks for the top layer's squash file; the
    graph's copy goes; the same image again does nothing; a changed image is migrated
    and the one it replaces leaves the squash store (not when it shares the top layer)."""
    calls = tmp_path / "calls"
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "podman-hpc"
    fake.write_text(FAKE.format(python=sys.executable, calls=str(calls)))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    env = dict(podman_hpc.write_site(None))
    monkeypatch.setenv("G", str(podman_hpc.site_dir() / "graph"))
    monkeypatch.setenv("SQUASH_DIR", env["SQUASH_DIR"])

    def image(digest: str, top: str, old: str = "", oldtop: str = "") -> convert.Artifacts:
        art = convert.Artifacts(f"sha256:{digest}", tmp_path / digest)
        art.dir.mkdir()
        art.squashfs.write_text(f"root of {digest}")
        monkeypatch.setenv("ID", digest)
        monkeypatch.setenv("TOP", top)
        monkeypatch.setenv("OLD", old)
        monkeypatch.setenv("OLDTOP", oldtop)
        return art

    art = image("a" * 64, "t1")
    assert podman_hpc.migrate("localhost/kit/x:1", art, env) == "localhost/kit/x:1"
    assert calls.read_text().splitlines() == [
        f"load --quiet --input {art.tar}",
        "migrate localhost/kit/x:1",
        "rmi localhost/kit/x:1",
    ]
    squash = Path(env["SQUASH_DIR"]) / "overlay" / "l" / "LINKt1.squash"
    assert squash.read_text() == f"root of {'a' * 64}"
    assert os.path.samefile(squash, art.squashfs)  # a link, no copy

    calls.unlink()
    podman_hpc.migrate("localhost/kit/x:1", art, env)
    assert not calls.exists()

    art = image("b" * 64, "t2", "a" * 64, "t1")
    podman_hpc.migrate("localhost/kit/x:1", art, env)
    assert calls.read_text().splitlines()[-1] == f"rmsqi {'a' * 64}"

    calls.unlink()
    art = image("c" * 64, "t2", "b" * 64, "t2")  # a changed config, the same layers
    podman_hpc.migrate("localhost/kit/x:1", art, env)
    assert "rmsqi" not in calls.read_text()


def test_a_failed_migration_says_so(tmp_path, monkeypatch):
    """podman-hpc migrate exits 0 whatever happened: kit checks the store."""
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "podman-hpc"
    fake.write_text("#!/bin/sh\n[ $1 = migrate ] && echo 'Squash Failed' >&2\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    env = dict(podman_hpc.write_site(None))
    art = convert.Artifacts("sha256:" + "a" * 64, tmp_path)
    with pytest.raises(KitError, match="left no image"):
        podman_hpc.migrate("localhost/kit/x:1", art, env)


def test_hosts_asked_over_ssh_get_the_sites_environment_on_the_command_line(prep, monkeypatch):
    """ssh carries no environment: the identity and the clean-up name the site themselves."""
    monkeypatch.setenv("KIT_CACHE", "/c")
    rt = runtimes.get("podman-hpc-shared")
    site = [
        "env", "PODMANHPC_CONFIG_FILE=/c/podman-hpc/podman_hpc.yaml",
        "SQUASH_DIR=/c/podman-hpc/squash", "CONTAINERS_CONF=/c/podman-hpc/containers.conf",
        "podman-hpc",
    ]  # fmt: skip
    assert rt.identity(prep) == [
        *site, "images", "--no-trunc", "--format", "{{.Id}}", "--filter",
        "reference=localhost/kit/x:1",
    ]  # fmt: skip
    left = rt.leftovers(job())
    assert left.find == [*site, "ps", "--all", "--quiet", "--filter", "label=kit.trial=kit-abc-3"]
    assert left.remove == [*site, "rm", "--force"]


def test_an_open_mpi_image_takes_pmix_check_that_root_inside_passes(tmp_path, monkeypatch):
    """Open MPI's ranks as root inside reach mpirun's PMIx server only with its uid check
    off (the caller's uid registered them): mpirun and its ranks get PMIx's settings, each
    rank Open MPI's and PMIx's variables, and the report says so."""
    from kit.image import recipes

    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    art = convert.Artifacts("sha256:" + "f" * 64, tmp_path / "f")
    monkeypatch.setattr(convert, "convert", lambda r, v, f: art)
    monkeypatch.setattr(podman_hpc, "migrate", lambda ref, a, env: ref)

    def no_mpich(name: str) -> str:
        raise KitError(f"no host {name}")

    monkeypatch.setattr(podman_hpc.apptainer, "host_library", no_mpich)
    recipe = recipes.load("pytorch2-openmpi")
    prep = runtimes.get("podman-hpc-shared").prepare(recipe, "cpu")
    env = dict(prep.env)
    assert (env["PMIX_MCA_psec"], env["PMIX_MCA_gds"]) == ("none", "hash")
    assert (env["PODMANHPC_LOCALID_VAR"], env["PODMANHPC_TASKS_PER_NODE_VAR"]) == (
        "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    )  # fmt: skip
    assert prep.settings[0].startswith("Open MPI: PMIX_MCA_psec=none PMIX_MCA_gds=hash")
    site = json.loads((tmp_path / "podman-hpc" / "podman_hpc.yaml").read_text())
    execs = site["shared_run_exec_args"]
    assert execs[execs.index("OMPI_*") - 1] == "-e" and "PMIX_*" in execs
