"""recipe -> Docker image -> SIF / Shifter squashfs -> runs in four runtimes -> report."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
import uuid
from pathlib import Path

import pytest

from kit.image import recipes

from ..conftest import MINI, REPO
from .conftest import IMAGE, docker, kit, leftovers, records, running_trials

pytestmark = pytest.mark.integration

RECIPE = recipes.load(IMAGE)
TAG = RECIPE.tag("cpu")


def run_args(
    runtimes: str,
    out: Path,
    *,
    np: str = "2",
    repeats: str = "1",
    steps: str = "10",
    timeout: str = "300",
    warmups: str = "0",
) -> list[str]:
    """`kit run` arguments for a short campaign (by default without warm-up trials)."""
    return [
        "run",
        IMAGE,
        "--runtime",
        runtimes,
        "--np",
        np,
        "--repeats",
        repeats,
        "--warmup-trials",
        warmups,
        "--baseline-launches",  # one trial a runtime and round: the pipeline is checked here
        "1",
        "--steps",
        steps,
        "--timeout",
        timeout,
        "--out",
        str(out),
    ]


def test_image_records_what_it_contains(built):
    labels = json.loads(docker("image", "inspect", TAG))[0]["Config"]["Labels"]
    assert labels["kit.mpi.flavour"] == "mpich"
    assert labels["kit.recipe.version"] == RECIPE.version
    manifest = json.loads((built["dir"] / "manifest.json").read_text())
    for apt in ("python3-torch=1.13.1+dfsg-4", "python3-torchvision=0.14.1-2", "mpich=4.0.2-3+b1"):
        assert apt in manifest["apt"] and apt in labels["kit.apt-packages"].split()
    assert "mpi4py==3.1.4" in manifest["pip"]
    assert labels["kit.pip-packages"].split() == manifest["pip"]
    lib = docker(
        "run",
        "--rm",
        TAG,
        "python",
        "-c",
        "from mpi4py import MPI; print(MPI.Get_library_version())",
    )
    assert lib.startswith("MPICH Version:")


def test_ca_cert_serves_the_build_and_stays_out_of_every_layer(ready, tmp_path):
    """kit build --ca-cert with a throwaway CA (appended to the host's bundle, so the
    package index still verifies): pip's steps run through it (a fresh description, a
    label ahead of them, defeats the layer cache; BuildKit does not key it on secrets),
    and no saved layer, nor the image's config (environment, labels, history), holds the
    CA afterwards. A pure-Python package stands in for the mini recipe's mpi4py: what
    is tested is the download, not a compile."""
    nonce = uuid.uuid4().hex
    root = tmp_path / "root"
    (root / "recipes").mkdir(parents=True)
    (root / "recipes" / "mini-openmpi.toml").write_text(
        MINI.replace('"python3=3.11.2-1+b1"', '"python3=3.11.2-1+b1", "python3-venv=3.11.2-1+b1"')
        .replace('description = "test recipe"', f'description = "CA test {nonce}"')
        .replace(
            'packages = ["mpi4py==3.1.4"]\nfrom_source = ["mpi4py"]', 'packages = ["six==1.17.0"]'
        )
    )
    shutil.copytree(REPO / "benchmarks", root / "benchmarks")  # as the kit_root fixture does
    key, cert = tmp_path / "ca.key", tmp_path / "ca.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", f"/CN=kit-throwaway-{nonce}", "-keyout", str(key), "-out", str(cert)),
        ],
        capture_output=True,
        check=True,
    )
    bundle = tmp_path / "bundle.pem"
    host = Path("/etc/ssl/certs/ca-certificates.crt").read_text()
    bundle.write_text(host + cert.read_text())
    env = {**os.environ, "KIT_ROOT": str(root)}
    kit("render", env=env)
    tag = "kit/mini-openmpi:0.1.0-cpu"
    try:
        kit("build", "mini-openmpi", "--ca-cert", str(bundle), env=env, timeout=1800)
        saved = tmp_path / "image.tar"
        docker("save", "-o", str(saved), tag)
        # one line of the certificate's body: unique to this CA, present in any copy of it
        needle = cert.read_text().splitlines()[2].encode()
        assert needle in cert.read_bytes() and needle not in host.encode()
        with tarfile.open(saved) as tar:  # layers (uncompressed tars) and the config JSON
            holding = [m.name for m in tar if m.isfile() and needle in tar.extractfile(m).read()]
        assert holding == []
        config = docker("image", "inspect", tag) + docker("history", "--no-trunc", tag)
        assert nonce in config and "BEGIN CERTIFICATE" not in config
        p = subprocess.run(["docker", "run", "--rm", tag, "test", "-e", "/run/secrets/cacert"])
        assert p.returncode == 1
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def test_conversions_are_cached_by_digest(built):
    d = built["dir"]
    before = {f: (d / f).stat().st_mtime for f in ("image.sif", "image.sqfs", "image.tar")}
    again = kit("convert", IMAGE, "--to", "singularity,shifter")
    assert again.stderr.count("cached for sha256:") == 3
    assert {f: (d / f).stat().st_mtime for f in before} == before
    conversion = json.loads((d / "manifest.json").read_text())["conversion"]
    assert set(conversion["seconds"]) == {"squashfs", "singularity", "docker-archive"}
    assert conversion["squashfs_compression"] == "zstd:3"


def test_the_sif_wraps_the_same_squashfs_with_the_image_environment(built):
    """One compression pass: the SIF's partition is byte for byte the Shifter squashfs,
    and Apptainer still sees the image's environment and labels."""
    d = built["dir"]
    dump = subprocess.run(
        ["apptainer", "sif", "dump", "1", str(d / "image.sif")], capture_output=True, check=True
    ).stdout
    assert hashlib.sha256(dump).digest() == hashlib.sha256((d / "image.sqfs").read_bytes()).digest()
    env = subprocess.run(
        ["apptainer", "exec", str(d / "image.sif"), "sh", "-c", "echo $KIT_IMAGE $PATH"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert env[0] == "pytorch-mpich" and env[1].startswith("/opt/kit/venv/bin:")
    labels = subprocess.run(
        ["apptainer", "inspect", "--labels", str(d / "image.sif")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"kit.recipe.version: {recipes.load(IMAGE).version}" in labels


def test_shifter_image_is_flattened_root_with_metadata(built):
    d = built["dir"]
    meta = json.loads((d / "image.meta.json").read_text())
    assert meta["image"] == TAG and meta["digest"].startswith("sha256:")
    assert "KIT_IMAGE=pytorch-mpich" in meta["env"]
    listing = subprocess.run(
        ["unsquashfs", "-lls", str(d / "image.sqfs"), "opt/kit/benchmarks/torch_cnn.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "root/root" in listing and "torch_cnn.py" in listing


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_keeps_finished_trials_and_leaves_nothing(built, tmp_path, sig):
    """Ctrl-C at the terminal, or SIGTERM from a batch system's time limit."""
    out = tmp_path / "int"
    proc = subprocess.Popen(
        ["kit", *run_args("docker,singularity,charliecloud", out, repeats="2", steps="300")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as from a terminal: not the SIGINT-ignoring disposition of a background job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    log = out / "trials.jsonl"
    deadline = time.monotonic() + 300
    while not (log.exists() and log.read_text().count("\n") >= 1):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.5)
    # Not on a clock: once the second trial's own processes run (a fast machine ends a
    # trial within a fixed wait, and a signal between trials interrupts none), then into it.
    campaign = json.loads((out / "campaign.json").read_text())["campaign"]
    while not running_trials(campaign) - {r["index"] for r in records(out)}:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.1)
    time.sleep(1)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    recs = records(out)
    assert recs[0]["status"] == "ok"
    assert recs[-1]["status"] == "interrupted"
    assert leftovers() == []  # waits for what is still ending


def test_timeout_leaves_nothing(built, tmp_path):
    out = tmp_path / "timeout"
    run = kit(*run_args("singularity,charliecloud,docker", out, steps="1000000", timeout="5"),
              check=False)  # fmt: skip
    assert [r["status"] for r in records(out)] == ["timeout"] * 3
    assert leftovers() == []
    # no arm had a trial that worked: the exit status says so, naming them
    assert run.returncode == 1, run.stderr[-2000:]
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("kit: error: no trial of ") and "docker (1 timeout)" in last


def test_ci_smoke_script_on_the_built_image(built, tmp_path):
    """What the images workflow runs after each build."""
    repo = Path(__file__).resolve().parents[2]
    p = subprocess.run(
        [str(repo / "ci" / "smoke"), IMAGE, "cpu", str(tmp_path / "smoke")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("smoke ok: pytorch-mpich") == 2


@pytest.mark.all_images
def test_pull_then_run_on_a_host_without_docker(built, tmp_path):
    """A cluster with Apptainer and no Docker: kit pull a published image, then kit run.
    The 'registry' here is the docker-save archive; KIT_DOCKER points nowhere."""
    env = {
        **os.environ,
        "KIT_CACHE": str(tmp_path / "cache"),
        "KIT_DOCKER": str(tmp_path / "no-docker"),
    }
    out = tmp_path / "pulled-run"
    fail = kit("run", IMAGE, "--runtime", "singularity", "--out", str(out), check=False, env=env)
    assert fail.returncode == 2 and "kit pull pytorch-mpich --ref" in fail.stderr
    kit("pull", IMAGE, "--ref", f"docker-archive://{built['dir'] / 'image.tar'}", env=env)
    kit(*run_args("singularity", out, steps="5"), env=env)
    (rec,) = records(out)
    assert rec["status"] == "ok", rec["output_tail"]
    assert rec["image_digest"].startswith("sif-sha256:")
    version_variant = TAG.split(":")[1]
    assert rec["image_ref"] == str(tmp_path / "cache" / "pulled" / IMAGE / f"{version_variant}.sif")


def test_kill_9_then_resume_loses_no_finished_trial(built, tmp_path):
    out = tmp_path / "resume"
    args = run_args("native", out, np="1", repeats="4", steps="200")
    proc = subprocess.Popen(["kit", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    log = out / "trials.jsonl"
    deadline = time.monotonic() + 300
    while not (log.exists() and log.read_text().count("\n") >= 2):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    proc.kill()  # SIGKILL: no clean-up, no last record
    proc.wait()
    before = records(out)
    assert 2 <= len(before) < 4 and all(r["status"] == "ok" for r in before)
    time.sleep(3)  # the orphaned trial finishes on its own
    kit(*args, "--resume")
    after = records(out)
    assert sorted(r["index"] for r in after) == [0, 1, 2, 3]
    assert after[: len(before)] == before
    assert len({r["campaign"] for r in after}) == 1
