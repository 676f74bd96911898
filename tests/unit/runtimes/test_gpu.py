"""GPUs: what the host shows (a fake nvidia-smi on PATH), each runtime's exact GPU argv,
and the one line a cuda variant gets where there is no GPU."""

import os
from pathlib import Path

import pytest

from kit import runtimes
from kit.core.errors import KitError
from kit.image import engine
from kit.runtimes import Job, Prepared, charliecloud, gpu
from kit.runtimes.base import WORKLOAD_PREFIXES

PROG = ["/opt/kit/venv/bin/python", "/opt/kit/benchmarks/torch_cnn.py"]
H100 = "0, NVIDIA H100 80GB HBM3, 550.54.15, 9.0\n1, NVIDIA H100 80GB HBM3, 550.54.15, 9.0\n"


@pytest.fixture
def prep():
    return Prepared("IMG", "sha256:0", PROG[0], "/opt/kit/benchmarks")


def job(ranks: int) -> Job:
    return Job(PROG, ranks, "mpirun.mpich", "kit-abc-3")


def fake_smi(folder: Path, monkeypatch, out: str, rc: int = 0) -> None:
    """An nvidia-smi that prints out (stdout when rc is 0, else stderr), alone on PATH."""
    smi = folder / "nvidia-smi"
    stream = ">&2" if rc else ""
    smi.write_text(f"#!/bin/sh\nprintf '%s' '{out}' {stream}\nexit {rc}\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))


def test_the_gpus_nvidia_smi_lists(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, H100)
    found = gpu.require("cuda")
    assert found == [
        gpu.Device("0", "NVIDIA H100 80GB HBM3", "550.54.15", "9.0"),
        gpu.Device("1", "NVIDIA H100 80GB HBM3", "550.54.15", "9.0"),
    ]
    assert gpu.require("cpu") == []


def test_a_cuda_variant_without_a_gpu_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    no_gpu = r"^--variant cuda runs on NVIDIA GPUs and this host shows none \(nvidia-smi is not"
    with pytest.raises(KitError, match=no_gpu + r" on PATH\); run --variant cpu here"):
        gpu.require("cuda")
    fake_smi(tmp_path, monkeypatch, "NVIDIA-SMI has failed: no driver loaded", rc=9)
    with pytest.raises(KitError, match=r"none \(nvidia-smi: NVIDIA-SMI has failed: no driver"):
        gpu.require("cuda")
    assert gpu.require("cpu") == []  # a CPU variant never asks


def test_each_runtime_passes_the_gpus_its_own_way(prep, monkeypatch):
    for k in os.environ:
        if k.startswith(WORKLOAD_PREFIXES):
            monkeypatch.delenv(k)
    monkeypatch.setenv("KIT_DOCKER", "docker")
    engine.docker.cache_clear()

    def command(name: str, ranks: int = 1) -> list[str]:
        rt = runtimes.get(name)
        return rt.command(rt.with_gpus(prep, "550.54.15"), job(ranks))

    docker = command("docker", 2)
    assert docker[docker.index("KIT_TRIAL") + 1 :] == [
        "--gpus=all", "IMG", "mpirun", "-np", "2", *PROG,
    ]  # fmt: skip
    podman = command("podman", 2)
    assert podman[podman.index("KIT_TRIAL") + 1 :] == [
        "--device=nvidia.com/gpu=all", "IMG", "mpirun", "-np", "2", *PROG,
    ]  # fmt: skip
    assert command("singularity", 2) == [
        "mpirun.mpich", "-np", "2", "apptainer", "exec", "--nv", "IMG", *PROG,
    ]  # fmt: skip
    assert command("shifter") == ["shifter", "--image=docker:IMG", "--module=gpu", "--", *PROG]
    assert command("native", 2) == ["mpirun.mpich", "-np", "2", *PROG]  # the host's driver


def test_charliecloud_runs_a_copy_with_the_hosts_driver_in_it(tmp_path, monkeypatch, prep):
    """ch-run has no GPU option: the squashfs is unpacked once per driver and ch-fromhost
    --nvidia copies the driver's libraries in; a second campaign finds the copy made."""
    ran = []
    monkeypatch.setattr(gpu, "stream", lambda argv, what: ran.append(argv))
    sqfs = tmp_path / "img.sqfs"
    rt = runtimes.get("charliecloud")
    squashfs = charliecloud.mounted(Prepared(str(sqfs), "sha256:0", PROG[0], "/b"))
    made = rt.with_gpus(squashfs, "550.54.15")
    image_dir = tmp_path / "nvidia-550.54.15"
    assert made.ref == str(image_dir)
    assert ran == [
        ["unsquashfs", "-no-progress", "-quiet", "-d", str(image_dir), str(sqfs)],
        ["ch-fromhost", "--nvidia", str(image_dir)],
    ]
    assert rt.command(made, job(1)) == ["ch-run", str(image_dir), "--", *PROG]  # no --mount
    rt.with_gpus(Prepared(str(sqfs), "sha256:0", PROG[0], "/b"), "550.54.15")
    assert len(ran) == 2
    with pytest.raises(KitError, match="under Slurm or --hosts run a cuda variant with"):
        rt.with_gpus(prep, "")  # a Slurm node's driver is not known from here


def test_what_each_runtime_lacks_for_gpus(tmp_path, monkeypatch):
    """Podman needs a CDI spec naming nvidia.com/gpu; Docker the toolkit's hook."""
    monkeypatch.setattr(gpu, "has_library", lambda soname: True)
    monkeypatch.setattr(gpu, "CDI_DIRS", (tmp_path / "etc-cdi", tmp_path / "run-cdi"))
    podman = runtimes.get("podman").gpu
    assert podman.missing() == [
        f"a CDI spec of nvidia.com/gpu in {tmp_path / 'etc-cdi'} or {tmp_path / 'run-cdi'}"
    ]
    (tmp_path / "run-cdi").mkdir()
    (tmp_path / "run-cdi" / "nvidia.yaml").write_text("cdiVersion: 0.6.0\nkind: nvidia.com/gpu\n")
    assert podman.missing() == []
    monkeypatch.setenv("PATH", str(tmp_path))
    assert runtimes.get("docker").gpu.missing() == ["nvidia-container-runtime-hook (not on PATH)"]


def test_doctor_shows_the_gpus_and_what_each_runtime_lacks(tmp_path, monkeypatch):
    from kit import doctor

    fake_smi(tmp_path, monkeypatch, H100)
    monkeypatch.setattr(gpu, "has_library", lambda soname: soname == "libcuda.so.1")
    assert doctor.gpus(["singularity", "docker"]) == [
        "GPU 0: NVIDIA H100 80GB HBM3, driver 550.54.15, compute capability 9.0",
        "GPU 1: NVIDIA H100 80GB HBM3, driver 550.54.15, compute capability 9.0",
        "GPUS VIA     OPTION      STATUS",
        "singularity  --nv        OK",
        "docker       --gpus=all  MISSING nvidia-container-runtime-hook (not on PATH)",
        "             needs: the NVIDIA Container Toolkit, whose hook dockerd runs for --gpus",
    ]
