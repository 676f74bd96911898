"""A recipe version is one image: built again with no cache, from another checkout, under
another clock, time zone, locale and umask, with kit on one core, it has the same digest,
and its squashfs and docker-save tar the same bytes, its SIF the same bytes less the fields
the SIF format fills anew (kit.image.sif). kit verify names what differs when it does."""

import hashlib
import http.server
import json
import os
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kit.image import engine, sif

from .conftest import DEFINITION, REPO, apptainer, docker, kit

pytestmark = pytest.mark.integration

TINY = """\
# The smallest recipe that runs what the images' steps run: apt packages with their
# scripts, update-alternatives, a venv with pip (its .pyc files), kit's labels.
name = "tiny-mpich"
version = "0.1.0"
source_date_epoch = 1795824000
description = "reproducibility test recipe"
distro = "bookworm"
stack = "current"
variants = ["cpu"]
benchmarks = ["mpi"]

[frameworks]

[mpi]
flavour = "mpich"
version = "4.0.2-3+b1"

[apt]
packages = ["python3=3.11.2-1+b1", "python3-venv=3.11.2-1+b1"]

[pip]
packages = ["packaging==26.3"]
"""


def checkout(root: Path) -> Path:
    """A checkout holding only the tiny recipe and the benchmarks, rendered."""
    (root / "recipes").mkdir(parents=True)
    (root / "recipes" / "tiny-mpich.toml").write_text(TINY)
    shutil.copytree(REPO / "benchmarks", root / "benchmarks")
    kit("render", env={**os.environ, "KIT_ROOT": str(root)})
    return root


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def twice(quiet, tmp_path_factory) -> dict:
    """The tiny image built and converted in one checkout, then verified (rebuilt with no
    cache) and converted again from another, with everything host-side varied. Only once
    the session's other builds are done: Docker 20.10's BuildKit panicked here ("failed to
    get edge") when a build with no cache shared steps with one running beside it."""
    import libfaketime

    a = checkout(tmp_path_factory.mktemp("first") / "kit")
    env_a = {**os.environ, "KIT_ROOT": str(a), "KIT_CACHE": str(a.parent / "cache")}
    kit("build", "tiny-mpich", env=env_a)
    first = Path(kit("convert", "tiny-mpich", "--to", "singularity,shifter", env=env_a)
                 .stdout.strip().splitlines()[-1])  # fmt: skip
    b = checkout(tmp_path_factory.mktemp("second") / "elsewhere" / "kit")
    _, faked = libfaketime.get_reload_information()
    env_b = {
        **os.environ,
        **faked,
        "FAKETIME": "+3d",
        "NO_FAKE_STAT": "1",
        "TZ": "Asia/Kathmandu",
        "LC_ALL": "C.UTF-8",
        "KIT_ROOT": str(b),
        "KIT_CACHE": str(b.parent / "cache"),
    }
    one_core = ["taskset", "-c", "0"]
    verify = subprocess.run(
        [*one_core, "kit", "verify", "tiny-mpich"],
        capture_output=True,
        text=True,
        env=env_b,
        timeout=1800,
        preexec_fn=lambda: os.umask(0o077),
    )
    conv = subprocess.run(
        [*one_core, "kit", "convert", "tiny-mpich", "--to", "singularity,shifter"],
        capture_output=True,
        text=True,
        env=env_b,
        timeout=1800,
        preexec_fn=lambda: os.umask(0o077),
    )
    assert conv.returncode == 0, conv.stderr[-3000:]
    return {
        "verify": verify,
        "first": first,
        "second": Path(conv.stdout.strip().splitlines()[-1]),
        "env": env_a,
    }


def test_a_rebuild_with_no_cache_under_other_conditions_is_the_same_image(twice):
    v = twice["verify"]
    assert v.returncode == 0, v.stdout[-2000:] + v.stderr[-3000:]
    assert v.stdout.startswith("reproduced: kit/tiny-mpich:0.1.0-cpu and kit-verify/"), v.stdout


def test_the_image_is_stored_once_and_its_inputs_are_not_built_again(twice):
    """The engine's own output goes once written again (it held a second copy of every
    image), and the verify's tag of the same image with it; a build of the same inputs
    is the image made, with no BuildKit pass."""
    untagged = docker("images", "--filter", "dangling=true", "--filter",
                      "label=kit.recipe=tiny-mpich", "--quiet")  # fmt: skip
    assert untagged == "" and docker("images", "--quiet", "kit-verify/tiny-mpich") == ""
    again = kit("build", "tiny-mpich", env=twice["env"])
    assert "these inputs made " in again.stderr and "not built again" in again.stderr
    assert "docker build" not in again.stderr and "#1 " not in again.stdout + again.stderr


def test_its_conversions_are_the_same_bytes_less_the_sif_header_fields(twice):
    first, second = twice["first"], twice["second"]
    assert first.name == second.name  # the same digest: the same cache folder name
    assert sha256(first / "image.sqfs") == sha256(second / "image.sqfs")
    assert sha256(first / "image.tar") == sha256(second / "image.tar")
    assert sif.digest(first / "image.sif") == sif.digest(second / "image.sif")
    assert sha256(first / "image.sif") != sha256(second / "image.sif")  # ID and dates


def test_verify_names_a_changed_file_and_a_changed_mode_and_exits_1(twice, tmp_path):
    """An image that differs from the recipe's by one file's content and one file's mode
    (as a tampered or a differently built one would)."""
    (tmp_path / "Dockerfile").write_text(
        "FROM kit/tiny-mpich:0.1.0-cpu\n"
        "RUN echo changed >> /etc/issue && chmod 600 /opt/kit/apt-packages.txt\n"
    )
    tag = f"kit-test/tampered-{os.getpid()}"
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}  # the client kit builds with (engine.docker)
    subprocess.run([engine.docker(), "build", "-q", "-t", tag, str(tmp_path)], check=True,
                   capture_output=True, env=env)  # fmt: skip
    try:
        p = kit("verify", "tiny-mpich", "--against", tag, check=False, env=twice["env"])
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    assert p.returncode == 1, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    assert lines[0].startswith("NOT reproduced: kit/tiny-mpich:0.1.0-cpu is sha256:")
    content = lines.index("  content: 1 path(s)")
    assert lines[content + 1] == "    /etc/issue"
    mode = lines.index("  mode: 1 path(s)")
    assert lines[mode + 1] == "    /opt/kit/apt-packages.txt"
    assert any(x.startswith("  config fields: ") and "rootfs" in x for x in lines), lines


def test_a_bundle_rebuilds_the_image_with_the_network_off(twice, tmp_path):
    """kit lock, kit bundle, then kit build --from-bundle: the bundle's files alone, the
    build's network off, and the same digest; a bundle of a file changed is refused."""
    env = twice["env"]
    kit("lock", "tiny-mpich", env=env)
    out = tmp_path / "bundle"
    held = json.loads(kit("bundle", "tiny-mpich", "--out", str(out), "--json", env=env).stdout)
    tag = "kit/tiny-mpich:0.1.0-cpu"
    built = docker("image", "inspect", "--format", "{{.Id}}", tag).strip()
    assert held["digest"] == built
    assert any(name.endswith(".deb") for name in held["files"])
    again = kit("build", "tiny-mpich", "--from-bundle", str(out), env=env)
    assert "--network=none" in again.stderr
    assert again.stdout.endswith(f"{built[:19]}, the digest the bundle names (reproduced)\n")
    assert docker("image", "inspect", "--format", "{{.Id}}", tag).strip() == built
    (out / "context" / "benchmarks" / "kitschema.py").write_text("changed\n")
    p = kit("build", "tiny-mpich", "--from-bundle", str(out), check=False, env=env)
    assert p.returncode == 2 and "kitschema.py is not the file the bundle holds" in p.stderr


def test_a_locked_build_installs_only_the_locked_files_each_checked_by_pip(twice):
    """Held to its lock, a build's pip reads the locked files alone, from a local index
    whose pages carry each file's SHA-256: the same image; and a file other than the
    locked one (the store's copy changed) stops the build in pip's own hash check, before
    the tag moves."""
    env = twice["env"]
    kit("lock", "tiny-mpich", env=env)
    tag = "kit/tiny-mpich:0.1.0-cpu"
    built = docker("image", "inspect", "--format", "{{.Id}}", tag).strip()
    p = kit("build", "tiny-mpich", "--no-cache", env=env)
    assert "pip installs the 1 locked file(s) it takes from an index" in p.stderr, p.stderr
    dockerfile = Path(env["KIT_CACHE"]) / "locked" / "tiny-mpich-cpu" / "Dockerfile"
    assert "RUN --mount=type=bind,source=.kit-index/tiny-mpich-cpu,target=/srv " in (
        dockerfile.read_text()
    )
    assert docker("image", "inspect", "--format", "{{.Id}}", tag).strip() == built
    root = Path(env["KIT_ROOT"])
    held = json.loads((root / "recipes" / "tiny-mpich.lock.json").read_text())["cpu"]
    (entry,) = [e for e in held["pip"] if e["from"] == "index"]
    stored = Path(env["KIT_CACHE"]) / "pip-files" / entry["sha256"] / entry["file"]
    good = stored.read_bytes()
    stored.write_bytes(good + b"\0")
    try:
        p = kit("build", "tiny-mpich", "--no-cache", check=False, env=env)
    finally:
        stored.write_bytes(good)
    assert p.returncode == 1, p.stderr[-2000:]
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in p.stdout + p.stderr, p.stderr[-3000:]
    assert docker("image", "inspect", "--format", "{{.Id}}", tag).strip() == built


class Snapshots(http.server.ThreadingHTTPServer):
    """A stand-in for a Debian snapshot service (none is reachable here): /TIME/PATH is the
    mirror's PATH, and every path asked for is kept."""

    def __init__(self, mirror: str) -> None:
        self.asked: list[str] = []
        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.asked.append(self.path)
                rest = self.path.lstrip("/").partition("/")[2]
                try:
                    with urllib.request.urlopen(f"{mirror.rstrip('/')}/{rest}", timeout=300) as r:
                        body = r.read()
                except urllib.error.HTTPError as e:
                    self.send_error(e.code)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("0.0.0.0", 0), Handler)


def bridge_address() -> str:
    """The host's address on Docker's default bridge, which a build's container reaches:
    the network's gateway, or, where dockerd names none (it found the bridge already up),
    the bridge interface's own IPv4 address."""
    net = json.loads(docker("network", "inspect", "bridge"))[0]
    if gateway := next((c.get("Gateway") for c in net["IPAM"]["Config"] if c.get("Gateway")), ""):
        return gateway
    device = net["Options"].get("com.docker.network.bridge.name", "docker0")
    words = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", device],
                           capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    return words[words.index("inet") + 1].split("/")[0]


def test_a_recipe_naming_a_snapshot_builds_from_it_to_the_same_image(twice, tmp_path):
    """With a snapshot service set, the build's apt steps read the recipe's snapshot (the
    stand-in sees its index and .deb files asked for under the recipe's time), through a
    build secret no layer keeps: the image is the one the mirror made."""
    from kit.image import debian_base

    tag = "kit/tiny-mpich:0.1.0-cpu"
    built = docker("image", "inspect", "--format", "{{.Id}}", tag).strip()
    root = tmp_path / "kit"
    (root / "recipes").mkdir(parents=True)
    (root / "recipes" / "tiny-mpich.toml").write_text(TINY.replace(
        "source_date_epoch = 1795824000",
        'source_date_epoch = 1795824000\ndebian_snapshot = "20260712T000000Z"',
    ))  # fmt: skip
    shutil.copytree(REPO / "benchmarks", root / "benchmarks")
    env = {**os.environ, "KIT_ROOT": str(root), "KIT_CACHE": str(tmp_path / "cache")}
    kit("render", env=env)
    gateway = bridge_address()
    service = Snapshots(debian_base.host_mirror())
    threading.Thread(target=service.serve_forever, daemon=True).start()
    try:
        url = f"http://{gateway}:{service.server_address[1]}/"
        p = kit("build", "tiny-mpich", "--no-cache", env={**env, "KIT_DEBIAN_SNAPSHOT": url})
    finally:
        service.shutdown()
    assert f"Debian's packages from {url}20260712T000000Z/" in p.stderr
    assert "/20260712T000000Z/dists/bookworm/InRelease" in service.asked, service.asked[:5]
    assert any(a.startswith("/20260712T000000Z/pool/main/") for a in service.asked)
    assert docker("image", "inspect", "--format", "{{.Id}}", tag).strip() == built


def test_a_definitions_sif_built_twice_is_one_sif_once_normalized(definition, tmp_path):
    """Built again by Apptainer from the same definition, base and Apptainer, minutes or
    hours later and from a base SIF at another path, the SIF differs in the build's date,
    the base's path and the dates of what %post wrote; kit normalize writes each as the
    same bytes less the SIF header's ID and dates, and the SIF it writes runs."""
    first = definition
    assert isinstance(first, Path), first
    base = tmp_path / "elsewhere" / "base.sif"
    base.parent.mkdir()
    shutil.copy2(first.parent / "base.sif", base)
    second = tmp_path / "second.sif"
    try:
        normalized_twice(first, base, second, tmp_path)
    finally:  # 2 GB of SIFs: pytest keeps its last runs' folders, and the suite needs disk
        for made in (base, second, *tmp_path.glob("normal-*.sif")):
            made.unlink(missing_ok=True)


def normalized_twice(first: Path, base: Path, second: Path, tmp_path: Path) -> None:
    """The definition built again from `base` as `second`, and both normalized."""
    p = apptainer(
        *("build", "--ignore-fakeroot-command"),
        *("--mksquashfs-args", "-comp zstd -Xcompression-level 3"),
        *("--bind", "/etc/ssl/certs/ca-certificates.crt:/run/secrets/cacert"),
        *("--build-arg", f"BASE_SIF={base}", str(second), DEFINITION),
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert sif.digest(first) != sif.digest(second)  # more than the header's fields differ
    made = []
    for i, raw in enumerate((first, second)):
        out = tmp_path / f"normal-{i}.sif"
        made.append(json.loads(kit("normalize", str(raw), "--out", str(out), "--json").stdout))
        assert made[-1]["digest"] == sif.digest(out) and made[-1]["epoch"] == 1795824000
    assert made[0]["digest"] == made[1]["digest"]
    probe = apptainer("exec", made[0]["out"], "python", "-c", "import torch, mpi4py")
    assert probe.returncode == 0, probe.stderr[-2000:]
    labels = apptainer("inspect", "--labels", made[0]["out"]).stdout
    assert "org.label-schema.build-date: Saturday_28_November_2026_0:00:00_UTC" in labels


def verified(image: str) -> None:
    p = kit("verify", image, check=False, timeout=3600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]


# each asks for its image by fixture, so that the image is built whatever -k selects
@pytest.mark.all_images
def test_pytorch_mpich_rebuilds_to_the_same_digest(built, quiet):
    verified("pytorch-mpich")


@pytest.mark.all_images
def test_pytorch2_openmpi_rebuilds_to_the_same_digest(openmpi, quiet):
    verified("pytorch2-openmpi")
