"""Compression settings, the exact Apptainer command `kit pull` runs, the cache lock, and
conversions made earlier serving a host whose engine is down."""

import contextlib
import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit import cli, runtimes
from kit.core import paths
from kit.core.errors import KitError
from kit.image import convert, debian_base, marks, pull, recipes


@pytest.mark.parametrize(
    ("spec", "args"),
    [
        ("zstd:3", ["-comp", "zstd", "-Xcompression-level", "3"]),
        ("gzip:6", ["-comp", "gzip", "-Xcompression-level", "6"]),
        ("lz4", ["-comp", "lz4"]),
        ("xz", ["-comp", "xz"]),
    ],
)
def test_mksquashfs_args_carry_the_setting(spec, args):
    assert convert.mksquashfs_args(spec) == args


def test_bad_compression_names_the_value_and_the_choices():
    with pytest.raises(KitError, match="compression 'zstd:fast' must be one of zstd, lz4, gzip"):
        convert.parse_compression("zstd:fast")
    with pytest.raises(KitError, match="mksquashfs takes no xz level: set compression 'xz'"):
        convert.mksquashfs_args("xz:6")


def test_pull_builds_with_the_kit_compression(kit_root, tmp_path, monkeypatch):
    """`apptainer build` gets the same compression `kit convert` uses; the SIF is filed
    with its reference and digest."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "argv.json"
    fake = bin_dir / "apptainer"
    fake.write_text(
        "#!/usr/bin/env python3\nimport json, sys\n"
        f"json.dump(sys.argv[1:], open({str(log)!r}, 'w'))\n"
        "open(sys.argv[-2], 'w').write('sif')\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KIT_SQUASHFS_COMPRESSION", "gzip:1")
    got = pull.pull(recipes.load("mini-openmpi"), "cpu", "site/kit-mini:0.1.0-cpu")
    sif = tmp_path / "cache" / "pulled" / "mini-openmpi" / "0.1.0-cpu.sif"
    assert json.loads(log.read_text()) == [
        *("build", "--force", "--mksquashfs-args", "-comp gzip -Xcompression-level 1"),
        str(sif.with_suffix(".sif.part")),
        "docker://site/kit-mini:0.1.0-cpu",
    ]
    assert (got.sif, got.ref) == (sif, "docker://site/kit-mini:0.1.0-cpu")
    assert got.digest.startswith("sif-sha256:") and Path(got.sif).read_text() == "sif"
    assert pull.pulled(recipes.load("mini-openmpi"), "cpu") == got
    # metadata of the wrong shape is refused, not carried into every record as a digest
    sif.with_suffix(".json").write_text(json.dumps({"ref": "x", "digest": {"sha": 1}}))
    with pytest.raises(KitError, match="has no readable metadata"):
        pull.pulled(recipes.load("mini-openmpi"), "cpu")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["pull", "mini-openmpi", "--ref=--fakeroot://x"],
         "--ref '--fakeroot://x' starts with '-', which apptainer build would read as one of "
         "its options; give a registry reference or an Apptainer source URI, e.g. "
         "docker://REGISTRY/IMAGE"),
        (["base", "--suite=--foreign"],
         "--suite '--foreign' starts with '-', which mmdebstrap would read as one of its "
         "options; give a Debian suite, e.g. bookworm"),
        (["base", "--mirror=--keyring=/tmp/k"],
         "--mirror '--keyring=/tmp/k' starts with '-', which mmdebstrap would read as one of "
         "its options; give the mirror's URL, as apt's sources name it (http://HOST/debian)"),
    ],
)  # fmt: skip
def test_a_value_passed_to_a_tool_as_an_operand_never_starts_with_a_dash(
    kit_root, tmp_path, monkeypatch, capsys, args, said
):
    """kit pull --ref and kit base --suite, --mirror reach apptainer build and debootstrap
    (as root) as operands, where a leading '-' made them options: refused in one line
    before any command runs."""

    def ran(argv, *a, **kw):
        raise AssertionError(f"ran {argv}")

    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))  # a pull that went on files there
    monkeypatch.setattr(subprocess, "run", ran)
    monkeypatch.setattr(subprocess, "Popen", ran)
    assert cli.main(args) == 2
    assert capsys.readouterr().err == f"kit: error: {said}\n"


def test_the_mirror_kit_base_takes_from_the_environment_is_checked_as_an_operand(monkeypatch):
    monkeypatch.setenv("KIT_DEBIAN_MIRROR", "-x")
    with pytest.raises(KitError, match=r"^KIT_DEBIAN_MIRROR '-x' starts with '-', which mmdeb"):
        debian_base.host_mirror()


def test_a_second_kit_waits_for_the_first_to_finish_making_a_cache_entry(tmp_path):
    """Two campaigns on one login node converting the same image: the second waits on
    the lock, then finds the products made, instead of writing the same files at once."""
    lock = tmp_path / "digest" / ".lock"
    second = [
        sys.executable,
        "-c",
        "import sys; from pathlib import Path; from kit.core.paths import exclusive\n"
        "with exclusive(Path(sys.argv[1]), 'the conversions'): print('made')",
        str(lock),
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(paths.__file__).parents[2])}
    with paths.exclusive(lock, "the conversions"):
        p = subprocess.Popen(second, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        # held until the second says it waits, not for a fixed time: a second kit slow to
        # start on a loaded host would otherwise find the lock already free
        said = p.stderr.readline().decode()
        assert said == f"waiting for another kit making the conversions ({lock})\n"
        assert p.poll() is None  # held here: the second kit cannot go on
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and out == b"made\n" and err == b""


def test_a_docker_archive_alone_records_its_time_without_a_squashfs(tmp_path, monkeypatch):
    """`kit convert --to docker-archive` (or Podman's first run) on a new digest: no
    squashfs, so no compression to record, and no error for its missing metadata."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    art = convert.Artifacts("sha256:0123", tmp_path)
    convert.record_made(recipes.load("pytorch-mpich"), "cpu", art, {"docker-archive": 10.6})
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest == {
        "digest": "sha256:0123",
        "tag": "kit/pytorch-mpich:1.3.0-cpu",
        "recipe_version": "1.3.0",
        "variant": "cpu",
        "conversion": {"seconds": {"docker-archive": 10.6}},
    }


def test_with_no_engine_a_sif_converted_earlier_serves_apptainer(tmp_path, monkeypatch, capsys):
    """A dead engine does not stop a SIF or a squashfs made earlier from running: the
    newest conversion of this recipe version and variant is used, and named."""
    dead = tmp_path / "docker"
    dead.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    dead.chmod(0o755)
    monkeypatch.setenv("KIT_DOCKER", str(dead))
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    recipe = recipes.load("pytorch-mpich")
    folders = tmp_path / "cache" / "images" / "pytorch-mpich"
    for digest, version, age in (("sha256:aa", "1.3.0", 2), ("sha256:bb", "1.3.0", 1),
                                 ("sha256:cc", "1.1.0", 0)):  # fmt: skip
        d = folders / digest[-2:]
        d.mkdir(parents=True)
        manifest = {"digest": digest, "recipe_version": version, "variant": "cpu"}
        (d / "manifest.json").write_text(json.dumps(manifest))
        (d / "image.sif").write_text("sif")
        os.utime(d / "image.sif", (1e9 - age, 1e9 - age))
    prep = runtimes.get("singularity").prepare(recipe, "cpu")
    assert (prep.ref, prep.digest) == (str(folders / "bb" / "image.sif"), "sha256:bb")
    assert capsys.readouterr().err == (
        f"no Docker engine answers: using {folders / 'bb' / 'image.sif'}, converted earlier "
        "from kit/pytorch-mpich:1.3.0-cpu (sha256:bb)\n"
    )
    assert convert.earlier(recipe, "cpu", "squashfs") is None  # no squashfs was made
    with pytest.raises(KitError, match="the Docker engine did not answer"):
        runtimes.get("charliecloud").prepare(recipe, "cpu")


def superseded(tmp_path: Path) -> Path:
    """Builds of pytorch-mpich in the cache: aa, bb, dd, ee of recipe version 1.3.0 (ee
    the one just converted), cc of 1.1.0; 5 MB a product."""
    folders = tmp_path / "images" / "pytorch-mpich"
    for key, version, files in (("aa", "1.3.0", ("image.sif", "image.sqfs", "image.tar")),
                                ("bb", "1.3.0", ("image.sif", "image.sqfs")),
                                ("cc", "1.1.0", ("image.sif",)),
                                ("dd", "1.3.0", ("image.sif",)),
                                ("ee", "1.3.0", ())):  # fmt: skip
        d = folders / key
        d.mkdir(parents=True)
        manifest = {"digest": f"sha256:{key}", "recipe_version": version, "variant": "cpu"}
        (d / "manifest.json").write_text(json.dumps(manifest))
        for f in files:
            (d / f).write_bytes(b"x" * 5_000_000)
    return folders


@contextlib.contextmanager
def in_use(folder: Path) -> Iterator[None]:
    """folder used by a running kit (a campaign): its mark held shared, as marks.use does."""
    with open(folder / marks.IN_USE, "a") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        yield


def test_a_new_conversion_removes_what_earlier_builds_of_the_image_made(
    tmp_path, monkeypatch, capsys
):
    """Rebuilt images (a new digest for the same recipe version and variant) used to keep
    every earlier build's SIF, squashfs and archive: gigabytes each. What the new
    conversion made goes from the earlier builds' folders (what it did not make stays
    for `earlier`); a folder left with no product goes; another recipe version, and a
    folder a running kit uses (its mark held), stay. No engine answers here: which
    images it still holds is not known, so no folder goes whole for that."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    monkeypatch.setattr(convert.engine, "image_ids", lambda: None)
    folders = superseded(tmp_path)
    new = convert.Artifacts("sha256:ee", folders / "ee")
    with in_use(folders / "dd"):
        convert.drop_superseded(
            recipes.load("pytorch-mpich"), "cpu", new, ["squashfs", "singularity"]
        )
    left = {d.name: sorted(p.name for p in d.iterdir()) for d in folders.iterdir()}
    assert left == {
        "aa": [".in-use", "image.tar", "manifest.json"],
        "cc": ["image.sif", "manifest.json"],
        "dd": [".in-use", "image.sif", "manifest.json"],
        "ee": ["manifest.json"],
    }
    assert sorted(capsys.readouterr().err.splitlines()) == [
        f"removed {gb} GB of the superseded conversions in {folders / key}"
        for key, gb in (("aa", "0.01"), ("bb", "0.01"))
    ]


def test_earlier_builds_the_engine_no_longer_holds_go_whole_unless_in_use(
    tmp_path, monkeypatch, capsys
):
    """After a conversion, the folders of earlier builds of the same tag whose image the
    engine no longer holds are removed whole, each said in one line; one a running
    campaign uses stays whole; one whose image the engine still holds loses only what
    was just made again."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    monkeypatch.setattr(convert.engine, "image_ids", lambda: {"sha256:bb", "sha256:ee"})
    folders = superseded(tmp_path)
    new = convert.Artifacts("sha256:ee", folders / "ee")
    with in_use(folders / "dd"):
        convert.drop_superseded(recipes.load("pytorch-mpich"), "cpu", new, ["singularity"])
    left = {d.name: sorted(p.name for p in d.iterdir()) for d in folders.iterdir()}
    assert left == {
        "bb": [".in-use", "image.sqfs", "manifest.json"],
        "cc": ["image.sif", "manifest.json"],
        "dd": [".in-use", "image.sif", "manifest.json"],
        "ee": ["manifest.json"],
    }
    assert sorted(capsys.readouterr().err.splitlines()) == [
        f"removed 0.01 GB of the superseded conversions in {folders / 'bb'}",
        f"removed 0.02 GB in {folders / 'aa'}: the conversions of sha256:aa, an earlier build "
        "of kit/pytorch-mpich:1.3.0-cpu that the engine no longer holds",
    ]


def test_conversion_says_each_phase_as_it_starts_and_ends(tmp_path, monkeypatch, capsys):
    """kit convert said nothing until a product was made (the squashfs takes minutes)."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    art = convert.Artifacts("sha256:0123", tmp_path / "a")
    monkeypatch.setattr(convert, "artifacts", lambda recipe, variant: art)
    monkeypatch.setattr(convert, "_room", lambda art, fmt, tag: None)
    monkeypatch.setattr(convert, "record_made", lambda *a: None)

    def made(fmt: str):
        def make(tag: str, art: convert.Artifacts) -> None:
            assert capsys.readouterr().err.endswith(f"{convert.DOING[fmt]} ...\n")
            art.products[fmt].write_bytes(b"x")

        return make

    for fmt in ("squashfs", "singularity"):
        monkeypatch.setattr(convert, {"squashfs": "_squashfs", "singularity": "_sif"}[fmt],
                            made(fmt))  # fmt: skip
    convert.convert(recipes.load("pytorch-mpich"), "cpu", ["singularity"])
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith(f"singularity: {art.sif} made in")
