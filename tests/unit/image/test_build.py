"""The exact docker build command line."""

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from kit.core.errors import KitError
from kit.image import build, engine, recipes


@pytest.fixture
def docker_named(monkeypatch):
    monkeypatch.setenv("KIT_DOCKER", "docker")
    engine.docker.cache_clear()
    yield
    engine.docker.cache_clear()


def test_build_argv(kit_root, docker_named, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.mirror.example/simple")
    r = recipes.load("mini-openmpi")
    argv = build.build_argv(
        r,
        "cpu",
        Path("/site/ca.pem"),
        build.Options(no_cache=True, cache_from=("kit/mini-openmpi:0.1.0-cpu",)),
        "kit/debian:bookworm-3a1c1aae27d1",
    )
    assert argv == [
        "docker",
        "build",
        "--progress=plain",
        "-t",
        "kit/mini-openmpi:0.1.0-cpu",
        "-f",
        f"{kit_root}/containers/mini-openmpi/Dockerfile",
        "--secret",
        "id=cacert,src=/site/ca.pem",
        "--build-arg",
        "BASE_IMAGE=kit/debian:bookworm-3a1c1aae27d1",
        "--build-arg",
        "KIT_PIP_INDEX_URL=https://pypi.mirror.example/simple",
        "--build-arg",
        "BUILDKIT_INLINE_CACHE=1",
        "--cache-from",
        "kit/mini-openmpi:0.1.0-cpu",
        "--no-cache",
        str(kit_root),
    ]


def test_ca_bundle_override_must_exist(tmp_path):
    with pytest.raises(KitError, match=r"CA bundle '.*/nope\.pem' is not a file; pass --ca-cert"):
        build.ca_bundle(tmp_path / "nope.pem")
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    assert build.ca_bundle(ca) == ca


def test_variant_tables_override_the_recipe(kit_root, mini):
    (kit_root / "recipes" / "mini-openmpi.toml").write_text(
        mini.replace('variants = ["cpu"]', 'variants = ["cpu", "cuda"]')
        + '[variant.cuda]\nbase = "nvidia/cuda:11.8.0-base-ubuntu22.04"\ndistro = "jammy"\n'
        + '[variant.cuda.env]\nNVIDIA_VISIBLE_DEVICES = "all"\n'
    )
    r = recipes.load("mini-openmpi")
    cuda = r.for_variant("cuda")
    assert (r.base, r.local_base) == ("kit/debian:bookworm", True)
    assert (cuda.base, cuda.distro, cuda.local_base) == (
        "nvidia/cuda:11.8.0-base-ubuntu22.04",
        "jammy",
        False,
    )
    assert cuda.env == (("NVIDIA_VISIBLE_DEVICES", "all"),) and r.env == ()
    assert cuda.pip == r.pip and cuda.tag("cuda") == "kit/mini-openmpi:0.1.0-cuda"
    assert build.build_argv(cuda, "cuda", None, build.Options())[6].endswith(
        "containers/mini-openmpi/Dockerfile.cuda"
    )
    from kit.image import render

    files = {p.name: text for p, text in render.outputs(r).items()}
    assert set(files) == {
        "Dockerfile",
        "Dockerfile.cuda",
        "mini-openmpi.def",
        "mini-openmpi-cuda.def",
    }
    assert "ARG BASE_IMAGE=nvidia/cuda:11.8.0-base-ubuntu22.04\n" in files["Dockerfile.cuda"]
    assert 'NVIDIA_VISIBLE_DEVICES="all"' in files["Dockerfile.cuda"]
    assert (
        "Bootstrap: docker\nFrom: nvidia/cuda:11.8.0-base-ubuntu22.04\n"
        in files["mini-openmpi-cuda.def"]
    )
    with pytest.raises(KitError, match="has no variant 'rocm'"):
        r.for_variant("rocm")


def test_unpullable_base_is_a_clear_error(kit_root, mini, tmp_path, monkeypatch):
    """A registry-less engine: inspect finds nothing and pull fails with its reason."""
    fake = tmp_path / "docker"
    fake.write_text(
        '#!/bin/sh\n[ "$1" = pull ] && echo "dial tcp: lookup: no such host" >&2\n'
        '[ "$1" = image ] && echo "Error: No such image: $3" >&2\nexit 1\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("KIT_DOCKER", str(fake))
    engine.docker.cache_clear()
    (kit_root / "recipes" / "mini-openmpi.toml").write_text(
        mini.replace('variants = ["cpu"]', 'variants = ["cpu", "cuda"]')
        + '[variant.cuda]\nbase = "nvidia/cuda:11.8.0-base-ubuntu22.04"\n'
    )
    cuda = recipes.load("mini-openmpi").for_variant("cuda")
    with pytest.raises(KitError) as e:
        build.ensure_base(cuda, "cuda")
    engine.docker.cache_clear()
    assert str(e.value) == (
        "the cuda variant of mini-openmpi builds FROM nvidia/cuda:11.8.0-base-ubuntu22.04, "
        "which this engine does not have and cannot pull (dial tcp: lookup: no such host); "
        "build it where that image can be pulled, or 'docker load' it here first"
    )


def test_the_inputs_key_changes_with_what_the_image_is_made_of_and_nothing_else(tmp_path):
    """A build whose key names an image the engine has is that image, not built again:
    whatever a layer could take in must change the key; what none keeps must not."""
    repo = tmp_path / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / ".kit-wheels").mkdir()
    (repo / ".dockerignore").write_text("*\n!benchmarks\n")
    (repo / "Dockerfile").write_text("FROM x\n")
    bench = repo / "benchmarks" / "b.py"
    bench.write_text("print(1)\n")
    argv = [
        "/usr/bin/docker",
        "build",
        "-t",
        "kit/x:1-cpu",
        "-f",
        str(repo / "Dockerfile"),
        "--secret",
        "id=cacert,src=/etc/ca.crt",
        "--build-arg",
        "BASE_IMAGE=b:1",
        str(repo),
    ]
    key = build.inputs_key(argv)
    same = [
        ["docker", *argv[1:]],  # another client
        [*argv[:3], "kit-verify/x:1-cpu", *argv[4:]],  # another tag
        [*argv[:7], "id=cacert,src=/other.crt", *argv[8:]],  # another CA bundle
    ]
    elsewhere = tmp_path / "clone"
    shutil.copytree(repo, elsewhere)  # the same checkout in another folder
    same.append([a.replace(str(repo), str(elsewhere)) for a in argv])
    assert {build.inputs_key(a) for a in same} == {key}
    (repo / "benchmarks" / "__pycache__").mkdir()
    (repo / "benchmarks" / "__pycache__" / "b.pyc").write_bytes(b"x")
    assert build.inputs_key(argv) == key
    changes = [
        lambda: bench.write_text("print(2)\n"),
        lambda: bench.chmod(0o755),
        lambda: (repo / ".kit-wheels" / "w.whl").write_bytes(b"w"),
        lambda: (repo / "Dockerfile").write_text("FROM y\n"),
        lambda: (repo / ".dockerignore").write_text("*\n"),
    ]
    keys = {key}
    for change in changes:
        change()
        keys.add(build.inputs_key(argv))
    keys.add(build.inputs_key([*argv[:-2], "BASE_IMAGE=b:2", argv[-1]]))
    held = {"version": "1", "apt": [], "pip": [{"name": "p", "file": "p.whl", "sha256": "aa"}]}
    keys.add(build.inputs_key(argv, held))  # held to a lock
    keys.add(build.inputs_key(argv, {**held, "pip": [{**held["pip"][0], "sha256": "bb"}]}))
    assert len(keys) == len(changes) + 4


def test_the_build_is_untagged_until_written_in_reproducible_form():
    """A `kit run` beside the build must not find the tag on the engine's raw output."""
    argv = ["docker", "build", "--progress=plain", "-t", "kit/x:1-cpu", "-f", "D", "/repo"]
    assert build.untagged_argv(argv, Path("/tmp/b/image-id")) == [
        *("docker", "build", "--progress=plain", "--iidfile", "/tmp/b/image-id"),
        *("-f", "D", "/repo"),
    ]


def test_the_local_base_is_built_from_by_a_tag_of_its_content(kit_root, tmp_path, monkeypatch):
    """The engine's frontend keeps what a tag resolved to while it runs: a base remade
    under kit/debian:bookworm must reach the build under a name no build has used."""
    base_id = "sha256:3a1c1aae27d166d651135894cf04f0e1b72f9b197930d7b4b004735ad0625004"
    log = tmp_path / "calls"
    fake = tmp_path / "docker"
    fake.write_text(
        f'#!/bin/sh\necho "$*" >> {log}\n'
        'if [ "$1 $3" = "image kit/debian:bookworm" ]; then\n'
        f'  echo \'[{{"Id": "{base_id}"}}]\'; exit 0\nfi\n'
        '[ "$1" = image ] && echo "Error: No such image: $3" >&2 && exit 1\nexit 0\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("KIT_DOCKER", str(fake))
    engine.docker.cache_clear()
    r = recipes.load("mini-openmpi")
    assert build.ensure_base(r, "cpu") == "kit/debian:bookworm-3a1c1aae27d1"
    engine.docker.cache_clear()
    assert log.read_text().splitlines() == [
        "image inspect kit/debian:bookworm",
        "image inspect kit/debian:bookworm-3a1c1aae27d1",
        f"tag {base_id} kit/debian:bookworm-3a1c1aae27d1",
    ]


SNAPSHOT = 'source_date_epoch = 1795824000\ndebian_snapshot = "20260712T000000Z"'


def test_a_recipe_snapshot_builds_from_that_archive_through_a_secret_on_the_apt_steps(
    kit_root, mini, docker_named, monkeypatch
):
    """The same Dockerfile, its apt-get steps reading the snapshot's sources.list (a build
    secret: in no layer, history line or cache key), the other steps as they were."""
    (kit_root / "recipes" / "mini-openmpi.toml").write_text(
        mini.replace("source_date_epoch = 1795824000", SNAPSHOT)
    )
    monkeypatch.setenv("KIT_CACHE", str(kit_root / "cache"))
    from kit.image import render

    r = recipes.load("mini-openmpi")
    render.write([r])
    plain = build.build_argv(r, "cpu", None, build.Options(), "kit/debian:bookworm-aa")
    monkeypatch.delenv("KIT_DEBIAN_SNAPSHOT", raising=False)
    assert build.from_snapshot(r, plain) == plain  # no service set: the mirror
    monkeypatch.setenv("KIT_DEBIAN_SNAPSHOT", "http://snapshot.example/archive/debian/")
    argv = build.from_snapshot(r, plain)
    folder = Path(argv[argv.index("-f") + 1]).parent
    assert argv == [
        *plain[:6],
        str(folder / "mini-openmpi.Dockerfile"),
        "--secret",
        f"id=aptsources,src={folder}/sources.list",
        *plain[7:],
    ]
    assert (folder / "sources.list").read_text() == (
        "deb [check-valid-until=no] http://snapshot.example/archive/debian/20260712T000000Z/ "
        "bookworm main\n"
    )
    text = (kit_root / "containers" / "mini-openmpi" / "Dockerfile").read_text()
    mounted = (folder / "mini-openmpi.Dockerfile").read_text()
    runs = [line for line in text.splitlines() if line.startswith("RUN ")]
    apt = [line for line in runs if "apt-get" in line]
    assert len(apt) == 2 and len(runs) > len(apt)
    assert mounted == text.replace(
        "RUN apt-get", f"RUN {build.SNAPSHOT_SOURCES} apt-get"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('debian_snapshot = "20261340T000000Z"', "debian_snapshot '20261340T000000Z' is not a UTC "
         "time like 20260712T000000Z (the Debian archive's state the recipe's lock was made on)"),
        ('debian_snapshot = "2026-07-12"', "debian_snapshot '2026-07-12' is not a UTC time"),
        ('debian_snapshot = "202607 1T000000Z"', "debian_snapshot '202607 1T000000Z' is not"),
    ],
)  # fmt: skip
def test_a_snapshot_that_is_no_time_is_one_line(kit_root, mini, text, said):
    (kit_root / "recipes" / "mini-openmpi.toml").write_text(
        mini.replace("source_date_epoch = 1795824000", f"source_date_epoch = 1795824000\n{text}")
    )
    with pytest.raises(KitError, match=re.escape(said)):
        recipes.load("mini-openmpi")


def test_a_snapshot_service_must_be_a_url(monkeypatch):
    from kit.image import debian_base

    # file: is not in a build; a URL without a host made apt's archive "http:/TIME"
    for bad in ("http://a/ b [trusted=yes]", "file:///srv/snapshots", "http://:8080/"):
        monkeypatch.setenv("KIT_DEBIAN_SNAPSHOT", bad)
        with pytest.raises(KitError, match=re.escape(f"KIT_DEBIAN_SNAPSHOT '{bad}' is not an "
                           "http(s) URL with a host; give the snapshot service")):  # fmt: skip
            debian_base.snapshot_url("20260712T000000Z")
    assert debian_base.snapshot_url("") is None


def test_the_engines_own_output_goes_even_when_the_write_fails(monkeypatch):
    removed = []
    monkeypatch.setattr(build.engine, "remove_quiet", removed.append)

    def full(*args):
        raise KitError("docker load of the reproducible image failed: no space left on device")

    monkeypatch.setattr(build.reproducible, "rewrite", full)
    with pytest.raises(KitError, match="no space left"):
        build.rewritten("sha256:raw", "kit/x:1-cpu", 1795824000, {})
    assert removed == ["sha256:raw"]


def test_a_variant_built_from_a_registry_image_takes_no_debian_snapshot():
    """horovod's CUDA variant builds FROM NVIDIA's Ubuntu image: Debian's archive is not
    its source, whatever the recipe names for its Debian variants."""
    r = recipes.load("horovod-mpich")
    assert r.snapshot == "20260712T000000Z" and r.for_variant("cuda").snapshot == ""


def _locked(kit_root: Path, cache: Path) -> dict:
    """A lock of the mini recipe's venv: one wheel and one sdist from the index (kept in
    kit's store), one of ensurepip's, as `kit lock` writes them."""
    pip = [
        {"name": "mpi4py", "version": "3.1.4", "from": "sdist", "file": "mpi4py-3.1.4.tar.gz"},
        {"name": "pip", "version": "23.0.1", "from": "ensurepip",
         "file": "/usr/share/python-wheels/pip-23.0.1-py3-none-any.whl"},
        {"name": "setuptools", "version": "70.3.0", "from": "index",
         "file": "setuptools-70.3.0-py3-none-any.whl"},
    ]  # fmt: skip
    for e in pip:
        if e["from"] != "ensurepip":
            body = f"{e['file']} bytes\n".encode()
            e["sha256"] = hashlib.sha256(body).hexdigest()
            (cache / "pip-files" / e["sha256"]).mkdir(parents=True)
            (cache / "pip-files" / e["sha256"] / e["file"]).write_bytes(body)
    held = {"version": "0.1.0", "apt": [], "pip": pip}
    (kit_root / "recipes" / "mini-openmpi.lock.json").write_text(json.dumps({"cpu": held}))
    return held


def test_a_locked_build_reads_pip_from_the_locks_files_mounted_on_the_index_steps(
    kit_root, docker_named, monkeypatch
):
    """The same Dockerfile, its steps that read pip's index reading the lock's files from
    a local index (each page: one file, with the lock's SHA-256, which pip checks), and
    pip's index setting yields to it; with no lock, argv as it was."""
    cache = kit_root / "cache"
    monkeypatch.setenv("KIT_CACHE", str(cache))
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.mirror.example/simple")
    from kit.image import render

    r = recipes.load("mini-openmpi")
    render.write([r])
    plain = build.build_argv(r, "cpu", None, build.Options(), "kit/debian:bookworm-aa")
    with build.from_lock(r, "cpu", None, plain) as argv:
        assert argv == plain  # no lock: the recipe's pins
    with build.from_lock(r, "cpu", {"version": "0.1.0", "apt": [], "pip": []}, plain):
        assert (kit_root / ".kit-index" / "mini-openmpi-cpu" / "simple").is_dir()  # mounted
    held = _locked(kit_root, cache)
    with build.from_lock(r, "cpu", held, plain) as argv:
        simple = kit_root / ".kit-index" / "mini-openmpi-cpu" / "simple"
        served = sorted(p.relative_to(simple).as_posix() for p in simple.rglob("*") if p.is_file())
        wheel = held["pip"][2]
        page = (simple / "setuptools" / "index.html").read_text()
        stored = cache / "pip-files" / wheel["sha256"] / wheel["file"]
        assert (simple / "setuptools" / wheel["file"]).stat().st_ino == stored.stat().st_ino
    assert not simple.parent.exists()  # the index goes with the build: no other build sends it
    mounted = cache / "locked" / "mini-openmpi-cpu" / "Dockerfile"
    assert argv == [
        *plain[:6],
        str(mounted),
        "--build-arg",
        "KIT_PIP_INDEX_URL=file:///srv/simple",
        "--build-arg",
        "BASE_IMAGE=kit/debian:bookworm-aa",
        "--build-arg",
        "BUILDKIT_INLINE_CACHE=1",
        str(kit_root),
    ]
    text = (kit_root / "containers" / "mini-openmpi" / "Dockerfile").read_text()
    mount = "--mount=type=bind,source=.kit-index/mini-openmpi-cpu,target=/srv"
    pip_step = "RUN --mount=type=secret,id=cacert,target=/run/secrets/cacert if "
    assert text.count(pip_step) == 1 and text.count("\nRUN ") == 5  # the venv's step only
    assert mounted.read_text() == text.replace(pip_step, f"RUN {mount} {pip_step[4:]}")
    assert served == [
        "mpi4py/index.html",
        "mpi4py/mpi4py-3.1.4.tar.gz",
        "setuptools/index.html",
        "setuptools/setuptools-70.3.0-py3-none-any.whl",
    ]
    assert page == (
        f'<html><body><a href="{wheel["file"]}#sha256={wheel["sha256"]}">{wheel["file"]}'
        "</a></body></html>\n"
    )


def test_a_locked_build_with_a_host_wheel_other_than_the_locks_is_refused(
    kit_root, mini, docker_named, monkeypatch
):
    """A recipe's host wheel (in .kit-wheels) that is not the locked file stops the build
    before it starts, naming the file, instead of building another image."""
    monkeypatch.setenv("KIT_CACHE", str(kit_root / "cache"))
    (kit_root / "recipes" / "mini-openmpi.toml").write_text(
        mini.replace("[pip]\n", '[pip]\nhost = ["torch==2.13.0+cpu"]\n')
    )
    from kit.image import render

    r = recipes.load("mini-openmpi")
    render.write([r])
    held = _locked(kit_root, kit_root / "cache")
    wheel = kit_root / ".kit-wheels" / "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"the host's wheel\n")
    held["pip"].append({"name": "torch", "version": "2.13.0+cpu", "from": "host",
                        "file": wheel.name, "sha256": "0" * 64})  # fmt: skip
    (kit_root / "recipes" / "mini-openmpi.lock.json").write_text(json.dumps({"cpu": held}))
    plain = build.build_argv(r, "cpu", None, build.Options(), "kit/debian:bookworm-aa")
    with pytest.raises(KitError) as e, build.from_lock(r, "cpu", held, plain):
        pass
    assert str(e.value).startswith(
        f"1 host wheel(s) in {kit_root}/.kit-wheels are not the locked files ({wheel.name} "
        f"(lock: {wheel.name}, SHA-256 000000000000)); build kit/mini-openmpi:0.1.0-cpu from "
        "its bundle"
    )
