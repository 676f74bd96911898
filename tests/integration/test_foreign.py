"""Your own image and command (kit run --image REF --command ...): an image kit did not
build, without a shell or Python and with an entrypoint of its own, measured under every
runtime and reported under its own figure's name and unit."""

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from kit.image import recipes
from kit.image.debian_base import base_tag

from .conftest import docker, kit, leftovers, records

pytestmark = pytest.mark.integration

TAG = "kit-test/loop:1"
# A compiled loop that prints its own figure; linked statically, so the image is the
# binary alone (FROM scratch: no shell, no Python, no libc), behind an entrypoint.
LOOP = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    volatile double x = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) x += i * 0.5;
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("rate: %.1f ops/s\n", n / ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9));
    return 0;
}
"""
DOCKERFILE = 'FROM scratch\nCOPY loop /loop\nENTRYPOINT ["/loop", "1"]\n'
MPI_TAG = "kit-test/mpiloop:1"
# The same loop as MPI ranks, each printing its own rate; the image has Debian's MPICH
# (the pytorch-mpich recipe's pins) and nothing else of kit's.
MPI_LOOP = LOOP.replace("#include <time.h>", "#include <time.h>\n#include <mpi.h>").replace(
    "    long n", "    MPI_Init(&argc, &argv);\n    long n").replace(
    "    return 0;", "    MPI_Finalize();\n    return 0;")  # fmt: skip
MPI_DOCKERFILE = f"""FROM {base_tag("bookworm")}
RUN apt-get -o APT::Sandbox::User=root update && \\
    DEBIAN_FRONTEND=noninteractive apt-get -o APT::Sandbox::User=root install -y \\
        --no-install-recommends {" ".join(recipes.load("pytorch-mpich").mpi.apt[:1])} && \\
    apt-get clean && rm -rf /var/lib/apt/lists/*
COPY mpiloop /usr/local/bin/mpiloop
"""
METRIC = ["--metric", r"rate: (?P<rate>[0-9.]+) ops/s", "--unit", "ops/s"]
TORCH_TAG = "kit-test/torch-trixie:1"
# A user's training script: PyTorch DDP over Gloo, its ranks numbered by the MPI launcher
# (PMI_RANK), each printing its own samples/s. It runs with PyTorch 2.6 from Debian 13 in
# the image and with the host's PyTorch 1.13 natively, as a user's venv would.
TRAIN = """\
import os, sys, time
import torch
rank, size = int(os.environ.get("PMI_RANK", 0)), int(os.environ.get("PMI_SIZE", 1))
torch.set_num_threads(max(1, (os.cpu_count() or 1) // size))
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
if size > 1:
    os.environ.setdefault("USE_LIBUV", "0")  # Debian builds PyTorch without libuv
    torch.distributed.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{sys.argv[2]}", rank=rank, world_size=size)
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
steps = int(sys.argv[1])
t0 = time.perf_counter()
for _ in range(steps):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
print(f"rank {rank} throughput: {steps * 64 / (time.perf_counter() - t0):.1f} samples/s")
"""
# Debian 13's own PyTorch and MPICH (their versions pinned): another base, another Python,
# another PyTorch than any kit recipe; Debian's PyTorch also links Open MPI's library.
TORCH_DOCKERFILE = f"""FROM {base_tag("trixie")}
RUN apt-get -o Acquire::Check-Valid-Until=false update && \\
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
        python3-torch=2.6.0+dfsg-7 mpich=4.3.0+really4.2.1-1 && \\
    apt-get clean && rm -rf /var/lib/apt/lists/*
COPY train.py /opt/train.py
"""


@pytest.fixture(scope="session")
def loop(ready, tmp_path_factory) -> Path:
    """The image in the local engine, and the binary on the host (the native arm's)."""
    folder = tmp_path_factory.mktemp("loop")
    (folder / "loop.c").write_text(LOOP)
    subprocess.run(["gcc", "-O1", "-static", "-o", folder / "loop", folder / "loop.c"], check=True)
    (folder / "Dockerfile").write_text(DOCKERFILE)
    docker("build", "--quiet", "--tag", TAG, str(folder))
    return folder / "loop"


@pytest.fixture(scope="session")
def mpi_loop(ready, tmp_path_factory) -> Path:
    """An image whose ranks load Debian's MPICH: the C loop as an MPI program."""
    folder = tmp_path_factory.mktemp("mpiloop")
    (folder / "mpiloop.c").write_text(MPI_LOOP)
    subprocess.run(
        ["mpicc.mpich", "-O1", "-o", folder / "mpiloop", folder / "mpiloop.c"], check=True
    )
    (folder / "Dockerfile").write_text(MPI_DOCKERFILE)
    docker("build", "--quiet", "--tag", MPI_TAG, str(folder))
    return folder / "mpiloop"


@pytest.fixture(scope="session")
def torch_trixie(ready, tmp_path_factory) -> Path:
    """The PyTorch image built from Debian 13, and its script on the host."""
    folder = tmp_path_factory.mktemp("torch")
    (folder / "train.py").write_text(TRAIN)
    (folder / "Dockerfile").write_text(TORCH_DOCKERFILE)
    docker("build", "--quiet", "--tag", TORCH_TAG, str(folder))
    return folder / "train.py"


def test_a_foreign_image_and_command_under_every_runtime_then_report(loop, tmp_path):
    out = tmp_path / "c"
    kit("run", "--image", f"docker:{TAG}", "--command", "/loop 3000000", *METRIC,
        "--native-command", f"{loop} 3000000", "--name", "loop",
        "--runtime", "native,docker,podman,singularity,charliecloud",
        "--repeats", "2", "--warmup-trials", "0", "--baseline-launches", "1",
        "--out", str(out))  # fmt: skip
    rs = records(out)
    assert len(rs) == 10 and {r["status"] for r in rs} == {"ok"}, [r["cause"] for r in rs]
    image_id = docker("image", "inspect", "--format", "{{.Id}}", TAG).strip()
    for r in rs:
        assert r["image"] == f"docker:{TAG}" and r["bench"] == "loop"
        assert r["result"]["value"] > 0 and r["result"]["metric"]["name"] == "rate"
        if r["runtime"] != "native":
            assert r["image_digest"] == image_id  # the conversions are filed under it
    report = kit("report", str(out)).stdout
    assert f"docker:{TAG} · loop · 1 rank(s)" in report
    assert "rate ops/s median [CI]" in report
    csv = kit("report", str(out), "--format", "csv").stdout.splitlines()
    assert csv[1].split(",")[14] == "value"  # the metric column names the command's figure
    assert not leftovers()

    # The SIF kit made, given alone: Apptainer runs it, Charliecloud its own partition.
    folder = image_id.split(":")[-1][:16]  # any other foreign image's SIF may be there too
    sif = next((Path.home() / ".cache/kit/images").glob(f"foreign-*/{folder}/image.sif"))
    alone = tmp_path / "sif"
    kit("run", "--image", str(sif), "--command", "/loop 3000000", *METRIC,
        "--runtime", "singularity,charliecloud", "--repeats", "1", "--warmup-trials", "0",
        "--out", str(alone))  # fmt: skip
    rs = records(alone)
    assert [r["status"] for r in rs] == ["ok", "ok"] and {r["image"] for r in rs} == {str(sif)}

    # A docker save archive: loaded into the engine, then as any engine image.
    tar = tmp_path / "loop.tar"
    docker("save", "-o", str(tar), TAG)
    kit("run", "--image", str(tar), "--command", "/loop 3000000", *METRIC, "--runtime",
        "docker,charliecloud", "--repeats", "1", "--warmup-trials", "0",
        "--out", str(tmp_path / "tar"))  # fmt: skip
    rs = records(tmp_path / "tar")
    assert [r["status"] for r in rs] == ["ok", "ok"] and {r["image_digest"] for r in rs} == {
        image_id
    }


def test_a_command_that_never_prints_its_figure_fails_each_trial_with_its_output(loop, tmp_path):
    out = tmp_path / "none"
    p = kit("run", "--image", f"docker:{TAG}", "--command", "/loop 10",
            "--metric", r"throughput: (?P<throughput>[0-9.]+)", "--runtime", "docker",
            "--repeats", "1", "--warmup-trials", "0", "--out", str(out), check=False)  # fmt: skip
    assert p.returncode == 1 and "no trial of docker (1 failed) succeeded" in p.stderr
    (r,) = records(out)
    assert r["status"] == "failed" and r["result"] is None
    assert r["cause"].startswith("no line of the output matched --metric 'throughput:")
    assert "rate: " in r["output_tail"]  # what it printed instead


def test_ranks_of_an_image_without_mpi_are_refused_before_the_first_trial(loop, tmp_path):
    p = kit("run", "--image", f"docker:{TAG}", "--command", "/loop 10", *METRIC,
            "--runtime", "singularity", "--np", "2", "--reduce", "sum",
            "--out", str(tmp_path / "np2"), check=False)  # fmt: skip
    last = p.stderr.splitlines()[-1]  # after the squashfs its file list is read from
    assert p.returncode == 2 and last.startswith("kit: error: --np 2: 'docker:kit-test/loop:1'")
    assert "holds no MPI library" in last and not (tmp_path / "np2").exists()


def test_mpi_ranks_of_a_foreign_image_under_every_runtime(mpi_loop, tmp_path):
    """The C loop as MPI ranks (no Python in the image), at 1 and 2 ranks: hybrid (the
    host's Hydra starts Apptainer and Charliecloud ranks), inside one container (Docker,
    Podman: the image's own mpirun), and natively; each record of 2 ranks says which MPI
    library its ranks mapped."""
    out = tmp_path / "np2"
    kit("run", "--image", f"docker:{MPI_TAG}", "--command", "/usr/local/bin/mpiloop 300000000",
        *METRIC, "--reduce", "sum", "--np", "1,2", "--native-command", f"{mpi_loop} 300000000",
        "--runtime", "native,docker,podman,singularity,charliecloud", "--repeats", "1",
        "--warmup-trials", "0", "--baseline-launches", "1", "--out", str(out))  # fmt: skip
    rs = records(out)
    assert {(r["ranks"], r["status"]) for r in rs} == {(1, "ok"), (2, "ok")}, [
        (r["runtime"], r["cause"]) for r in rs
    ]
    assert len(rs) == 10
    for r in rs:
        assert len(r["result"]["matches"]) == r["ranks"]  # one line a rank, summed
        assert r["result"]["value"] == sum(r["result"]["matches"])
        if r["ranks"] == 2:
            assert any("libmpich.so.12" in x for x in r["result"]["mpi_loaded"]), r["runtime"]
    assert not leftovers()
    p = kit("run", "--image", f"docker:{MPI_TAG}", "--command", "/usr/local/bin/mpiloop 10",
            *METRIC, "--reduce", "sum", "--np", "2", "--runtime", "singularity",
            "--mpirun", "mpirun.openmpi", "--dry-run", check=False)  # fmt: skip
    last = p.stderr.splitlines()[-1]
    assert p.returncode == 2 and "carries mpich" in last and "--mpirun mpirun.mpich" in last


def free_port() -> int:
    """A TCP port nothing listens on now, for the ranks' rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_pytorch_from_another_base_under_every_runtime(torch_trixie, tmp_path):
    """A user's PyTorch image (Debian 13, PyTorch 2.6) and training script, DDP at 2 ranks
    (one rank is the loop tests' case): its MPI is read as MPICH (the launcher it carries),
    though its PyTorch links Open MPI's library too; natively the same script runs with the
    host's PyTorch."""
    out = tmp_path / "torch"
    port = free_port()  # on the host's network in every runtime: no fixed one to collide on
    kit("run", "--image", f"docker:{TORCH_TAG}", "--command", f"python3 /opt/train.py 50 {port}",
        "--metric", r"throughput: (?P<throughput>[0-9.]+) samples/s", "--unit", "samples/s",
        "--reduce", "sum", "--np", "2", "--name", "train",
        "--native-command", f"/usr/bin/python3 {torch_trixie} 50 {port}",
        "--runtime", "native,docker,podman,singularity,charliecloud", "--repeats", "1",
        "--warmup-trials", "0", "--baseline-launches", "1", "--out", str(out))  # fmt: skip
    rs = records(out)
    assert {(r["runtime"], r["ranks"], r["status"]) for r in rs} == {
        (rt, 2, "ok") for rt in ("native", "docker", "podman", "singularity", "charliecloud")
    }, [(r["runtime"], r["ranks"], r["cause"]) for r in rs]
    for r in rs:
        assert len(r["result"]["matches"]) == r["ranks"] and r["result"]["value"] > 0
    report = kit("report", str(out)).stdout
    assert f"docker:{TORCH_TAG} · train · 2 rank(s)" in report, report
    assert "throughput samples/s median [CI]" in report
    assert not leftovers()


IMPORTED = """\
FROM kit/debian:bookworm
COPY loop /opt/loop/bin/loop
ENV PATH=/opt/loop/bin:$PATH
WORKDIR /work
USER 1000
CMD ["loop", "1000"]
"""


def test_kit_import_builds_with_apptainer_alone_then_runs(definition, loop, tmp_path):
    """A Dockerfile made a definition by spython, built by Apptainer from a local base SIF
    (no Docker, no registry), measured by kit run --image."""
    if isinstance(definition, str):
        pytest.fail(definition)
    base = Path(definition).parent / "base.sif"  # the kit base, made by Apptainer alone
    (tmp_path / "Dockerfile").write_text(IMPORTED)
    shutil.copy(loop, tmp_path / "loop")
    p = kit("import", str(tmp_path / "Dockerfile"), "--name", "loop", "--base", str(base),
            "--build", "apptainer")  # fmt: skip
    assert f"wrote {tmp_path / 'loop.def'} (from localimage:{base})" in p.stdout
    assert "not translated: line 5: USER 1000: Apptainer runs as the caller" in p.stdout
    sif = tmp_path / "loop.sif"
    assert f"built: kit run --image {sif}" in p.stdout
    out = tmp_path / "run"
    cache = {**os.environ, "KIT_CACHE": str(tmp_path / "cache")}  # a new SIF path each run
    kit("run", "--image", str(sif), "--command", "/opt/loop/bin/loop 3000000", *METRIC,
        "--runtime", "singularity,charliecloud", "--repeats", "1", "--warmup-trials", "0",
        "--out", str(out), env=cache)  # fmt: skip
    assert [r["status"] for r in records(out)] == ["ok", "ok"]


def test_kits_benchmarks_added_to_an_image_that_has_their_framework(built, loop, tmp_path):
    """The image taken as anyone's (it has PyTorch and mpi4py): kit's benchmarks go in as
    one layer and run with its own Python, at 1 and 2 ranks; an image without Python is
    refused with one line."""
    tag = recipes.load("pytorch-mpich").tag("cpu")
    image = f"docker:{tag}"
    out = tmp_path / "bench"
    kit("run", "--image", image, "--bench", "torch-cnn", "--model", "tiny", "--batch-size", "4",
        "--steps", "3", "--np", "1,2", "--runtime", "docker,charliecloud", "--repeats", "1",
        "--warmup-trials", "0", "--out", str(out))  # fmt: skip
    rs = records(out)
    assert {(r["runtime"], r["ranks"], r["status"]) for r in rs} == {
        (rt, n, "ok") for rt in ("docker", "charliecloud") for n in (1, 2)
    }, [r["output_tail"] for r in rs]
    base = docker("image", "inspect", "--format", "{{.Id}}", tag).strip()
    for r in rs:
        assert r["image"] == image and r["recipe_version"] == "foreign + kit benchmarks"
        assert r["image_digest"] != base and r["result"]["images_per_sec"] > 0
    p = kit("run", "--image", f"docker:{TAG}", "--bench", "torch-cnn", "--runtime", "docker",
            "--dry-run", check=False)  # fmt: skip
    assert p.returncode == 2 and "has no python3 that runs" in p.stderr.splitlines()[-1]
