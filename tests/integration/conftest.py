"""Integration fixtures: each image built once per session (all at once), then converted.

These need the Docker engine, the base image, Apptainer, Charliecloud and MPICH
(ci/test provisions them) and must run as an ordinary user. They fail, with
`kit doctor`'s table as the reason, when something is missing.
"""

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kit import recipes

IMAGE = "pytorch-mpich"
RUNTIMES = "native,docker,podman,singularity,charliecloud"
REPO = Path(__file__).resolve().parents[2]
HOROVOD_TAG = recipes.load("horovod-mpich").tag("cpu")
CAFFE2_TAG = recipes.load("caffe2-mpich").tag("cpu")


def kit(
    *args: str, check: bool = True, timeout: float = 1800, env: dict | None = None
) -> subprocess.CompletedProcess:
    p = subprocess.run(["kit", *args], capture_output=True, text=True, timeout=timeout, env=env)
    if check and p.returncode != 0:
        pytest.fail(f"kit {' '.join(args)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p


@pytest.fixture(scope="session")
def ready() -> None:
    if os.geteuid() == 0:
        pytest.fail("integration tests must run as an ordinary user: use ci/test")
    doctor = kit("doctor", "--runtime", RUNTIMES, check=False)
    if doctor.returncode != 0:
        pytest.fail("this host lacks what the tests need (run ci/provision):\n" + doctor.stdout)


# The images the suite builds, by the fixture through which tests ask for each.
IMAGE_OF = {
    "built": IMAGE,
    "openmpi": "pytorch-openmpi",
    "horovod": "horovod-mpich",
    "caffe2": "caffe2-mpich",
}
DEFINITION = "test_definition_builds_with_apptainer_alone"  # builds with the images


def apptainer(*args: str, timeout: float = 3000) -> subprocess.CompletedProcess:
    """apptainer from the repository root (definitions name files relative to it)."""
    return subprocess.run(
        ["apptainer", *args], capture_output=True, text=True, cwd=REPO, timeout=timeout
    )


def build_definition(scratch: Path) -> Path | str:
    """pytorch-mpich's definition made into a SIF by Apptainer alone, as an ordinary user:
    the local base as a SIF (from its archive), then the definition. The SIF, or why not."""
    base_tar = scratch / "base.tar"
    save = ["docker", "save", "-o", str(base_tar), "kit/debian:bookworm"]
    if (p := subprocess.run(save, capture_output=True, text=True)).returncode != 0:
        return f"{' '.join(save)} exited {p.returncode}: {p.stderr[-1000:]}"
    sif = scratch / "pytorch-mpich.sif"
    for args in (
        ("build", str(scratch / "base.sif"), f"docker-archive://{base_tar}"),
        (
            *("build", "--ignore-fakeroot-command"),
            *("--mksquashfs-args", "-comp zstd -Xcompression-level 3"),  # as the README's
            *("--bind", "/etc/ssl/certs/ca-certificates.crt:/run/secrets/cacert"),
            *("--build-arg", f"BASE_SIF={scratch / 'base.sif'}"),
            *(str(sif), "containers/pytorch-mpich/pytorch-mpich.def"),
        ),
    ):
        p = apptainer(*args)
        if p.returncode != 0:
            return f"apptainer {' '.join(args)} exited {p.returncode}:\n{p.stderr[-3000:]}"
    return sif


@pytest.fixture(scope="session")
def builds(ready, request, tmp_path_factory) -> dict:
    """Every image this session's tests ask for, and the definition build, at the same
    time: the builds' single-threaded steps (apt, pip, a compile's configure) leave a
    core idle that the others use (on 2 cores: 902 s together against ~1015 s one after
    another). No test runs (or measures) until all are done. Each image build's stdout
    by image; under "definition" the definition's SIF, or why it failed."""
    items = request.session.items
    wanted = sorted({IMAGE_OF[f] for i in items for f in i.fixturenames if f in IMAGE_OF})
    scratch = tmp_path_factory.mktemp("builds")

    def build(image: str) -> subprocess.CompletedProcess:
        return subprocess.run(["kit", "build", image], capture_output=True, text=True, timeout=3600)

    with ThreadPoolExecutor(max_workers=len(wanted) + 1) as pool:
        images = {image: pool.submit(build, image) for image in wanted}
        definition = None
        if any(i.originalname == DEFINITION for i in items):
            definition = pool.submit(build_definition, scratch)
        done = {image: f.result() for image, f in images.items()}
        sif = definition.result() if definition else None
    failed = [f"{image}: {p.stderr[-2000:]}" for image, p in done.items() if p.returncode != 0]
    if failed:
        pytest.fail("kit build failed for " + "\n".join(failed))
    return {**{image: p.stdout for image, p in done.items()}, "definition": sif}


@pytest.fixture(scope="session")
def built(builds) -> dict:
    """pytorch-mpich converted once; later conversions of the same digest must be free."""
    conv = kit("convert", IMAGE, "--to", "singularity,shifter")
    return {"dir": Path(conv.stdout.strip().splitlines()[-1])}


@pytest.fixture(scope="session")
def openmpi(builds) -> Path:
    """pytorch-openmpi converted once, for every Open MPI test."""
    conv = kit("convert", "pytorch-openmpi", "--to", "singularity,charliecloud")
    return Path(conv.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def horovod(builds) -> dict:
    """horovod-mpich's manifest (Horovod compiled in its builder stage)."""
    out = builds["horovod-mpich"]
    path = next(line.split()[-1] for line in out.splitlines() if line.startswith("manifest "))
    return json.loads(open(path).read())


@pytest.fixture(scope="session")
def caffe2(builds) -> None:
    """caffe2-mpich, built."""


def in_image(tag: str, *argv: str, volume: str | None = None) -> subprocess.CompletedProcess:
    """Run in the image as the invoking user, with the same settings kit's docker runtime uses."""
    user = f"{os.getuid()}:{os.getgid()}"
    mount = ["-v", volume] if volume else []
    settings = ["--user", user, "--ipc=host", "--network=host", "-e", "HOME=/tmp", *mount]
    return subprocess.run(
        ["docker", "run", "--rm", *settings, tag, *argv],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="session")
def cluster(ready) -> None:
    """The local two-node Slurm cluster that ci/provision starts."""
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True)
    if "kit-n1 idle" not in nodes.stdout or "kit-n2 idle" not in nodes.stdout:
        pytest.fail(f"the local Slurm cluster is not up (run ci/provision): {nodes.stdout}")


# What a trial starts; none of it may outlive the trial (kit stops the whole tree).
LEFTOVER = (
    "squashfuse", "mpirun", "hydra_pmi_proxy", "orted", "ch-run", "starter", "conmon",
    "torch_cnn", "tf_cnn", "caffe2_cnn", "mpi_bench", "lean.py",
)  # fmt: skip


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout


def leftovers() -> list[str]:
    """Our processes that a trial could have left behind, and kit containers."""
    mine = subprocess.run(
        ["ps", "-u", str(os.getuid()), "-o", "pid=,args="], capture_output=True, text=True
    ).stdout.splitlines()
    procs = [p for p in mine if any(word in p for word in LEFTOVER)]
    containers = docker("ps", "-a", "--filter", "name=kit-", "--format", "{{.Names}}").split()
    return procs + containers


def trial_processes() -> list[str]:
    """Our processes that carry a trial's KIT_TRIAL marker (kit sets it in every trial's
    environment, so every rank and launcher has it), and kit's containers."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"\0KIT_TRIAL=" in b"\0" + (entry / "environ").read_bytes():
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120])
        except OSError:
            continue
    containers = docker("ps", "-a", "--filter", "name=kit-", "--format", "{{.Names}}").split()
    return found + containers


@pytest.fixture(autouse=True)
def nothing_left_behind():
    """After every integration test, no process or container of any trial it ran is left
    (a test that killed kit itself gets 30 s for the orphans to finish)."""
    yield
    deadline = time.monotonic() + 30
    while (left := trial_processes()) and time.monotonic() < deadline:
        time.sleep(1)
    assert left == [], f"left behind: {left}"
