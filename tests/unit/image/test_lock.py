"""The lock: what an image holds, read from the mirror's index, and checked after a build."""

import hashlib
import lzma
import subprocess
from pathlib import Path

import pytest

from kit import cli
from kit.core.errors import Failed, KitError
from kit.image import lock, recipes

PACKAGES = """\
Package: libc6
Version: 2.36-9+deb12u14
Filename: pool/main/g/glibc/libc6_2.36-9+deb12u14_amd64.deb
SHA256: aa11
Description: GNU C Library
 a continued line: with a colon

Package: python3
Version: 3.11.2-1+b1
Filename: pool/main/p/python3-defaults/python3_3.11.2-1+b1_amd64.deb
SHA256: bb22
"""


def test_the_index_gives_each_versions_file_and_hash(tmp_path):
    folder = tmp_path / "dists" / "bookworm" / "main" / "binary-amd64"
    folder.mkdir(parents=True)
    (folder / "Packages.xz").write_bytes(lzma.compress(PACKAGES.encode()))
    index = lock.debian_index(f"file://{tmp_path}", "bookworm")
    assert index == {
        ("libc6", "2.36-9+deb12u14"): {
            "sha256": "aa11",
            "pool": "pool/main/g/glibc/libc6_2.36-9+deb12u14_amd64.deb",
        },
        ("python3", "3.11.2-1+b1"): {
            "sha256": "bb22",
            "pool": "pool/main/p/python3-defaults/python3_3.11.2-1+b1_amd64.deb",
        },
    }
    with pytest.raises(KitError, match=r"cannot read file://.*/dists/sid/.*set KIT_DEBIAN_MIRROR"):
        lock.debian_index(f"file://{tmp_path}", "sid")


LOCK = {
    "version": "0.1.0",
    "apt": [
        {"package": "libc6", "version": "2.36-9+deb12u14"},
        {"package": "python3", "version": "3.11.2-1+b1"},
    ],
    "pip": [{"name": "mpi4py", "version": "3.1.4"}, {"name": "tensorboardX", "version": "2.6"}],
}


def test_differences_name_each_package_the_image_holds_otherwise():
    apt = ["libc6=2.36-9+deb12u15", "zlib1g=1:1.2.13"]
    pip = [["mpi4py", "3.1.4", ""], ["TensorBoardX", "2.6", ""], ["numpy", "1.26.4", ""]]
    assert lock.differences(LOCK, apt, pip) == [
        "libc6 2.36-9+deb12u15 (lock: 2.36-9+deb12u14)",
        "python3 (only in the lock, 3.11.2-1+b1)",
        "zlib1g 1:1.2.13 (not in the lock)",
        "numpy 1.26.4 (not in the lock)",
    ]
    same = [["mpi4py", "3.1.4", ""], ["tensorboardx", "2.6", ""]]
    assert lock.differences(LOCK, ["libc6=2.36-9+deb12u14", "python3=3.11.2-1+b1"], same) == []


def test_a_build_is_checked_against_the_recipes_lock(kit_root, monkeypatch):
    r = recipes.load("mini-openmpi")
    apt = ["libc6=2.36-9+deb12u14", "python3=3.11.2-1+b1"]
    assert lock.check(r, "cpu", apt, "img") == (
        "mini-openmpi 0.1.0 has no lock for cpu: kit lock mini-openmpi records one"
    )
    lock.write(r, "cpu", LOCK)
    lock.write(r, "cuda", {"version": "0.1.0", "apt": [], "pip": []})
    assert set(lock.read(r)) == {"cpu", "cuda"}  # a variant's lock keeps the others'
    venv = [["mpi4py", "3.1.4", ""], ["tensorboardX", "2.6", ""]]
    monkeypatch.setattr(lock, "venv_dists", lambda image: venv)
    assert lock.check(r, "cpu", apt, "img") == (
        "kit/mini-openmpi:0.1.0-cpu holds exactly what mini-openmpi.lock.json locks"
    )
    venv[0][1] = "4.0.0"
    with pytest.raises(Failed) as e:
        lock.check(r, "cpu", [*apt, "gcc=12"], "img")
    assert str(e.value) == (
        "kit/mini-openmpi:0.1.0-cpu is not what mini-openmpi.lock.json locks: 2 package(s) "
        "differ (gcc 12 (not in the lock); mpi4py 4.0.0 (lock: 3.1.4)); build "
        "kit/mini-openmpi:0.1.0-cpu from its bundle (kit build mini-openmpi --from-bundle "
        "DIR), point KIT_DEBIAN_MIRROR at a mirror or snapshot that has them, point pip at "
        "what served the lock, or run 'kit lock IMAGE' to take what the mirror and the index "
        "serve now"
    )
    lock.write(r, "cpu", {**LOCK, "version": "0.0.9"})  # another version's lock: none of its
    assert lock.applying(r, "cpu") is None
    assert lock.check(r, "cpu", apt, "img").startswith("mini-openmpi 0.1.0 has no lock for cpu")


def test_a_build_whose_locked_packages_left_the_mirror_is_refused_before_it_starts(
    kit_root, monkeypatch
):
    """Nothing is built in their place: the build stops before docker build, naming them."""
    from kit.image import build

    r = recipes.load("mini-openmpi")
    lock.write(r, "cpu", LOCK)
    monkeypatch.setattr(lock, "debian_index", lambda mirror, suite: {})  # the mirror moved
    monkeypatch.setattr(build.engine, "server_version", lambda: "20.10.24")
    monkeypatch.setattr(build, "ensure_base", lambda r, v: "kit/debian:bookworm-aa")
    monkeypatch.setattr(build, "stream", lambda *a, **k: pytest.fail("docker build ran"))
    monkeypatch.setattr(build.engine, "found", lambda ref: None)
    monkeypatch.setenv("KIT_CACHE", str(kit_root / "cache"))
    monkeypatch.setenv("KIT_DEBIAN_MIRROR", "http://mirror.example/debian")
    assert cli.main(["render"]) == 0
    with pytest.raises(
        Failed,
        match=r"2 package\(s\) mini-openmpi.lock.json locks are no longer "
        r"on http://mirror.example/debian \(libc6=2.36-9\+deb12u14, python3=3.11.2-1\+b1\); build",
    ):
        build.make(r.for_variant("cpu"), "cpu", build.Options(), r.tag("cpu"))


def test_a_recipe_snapshot_is_where_the_lock_is_looked_up_and_the_way_out_names_it(
    kit_root, mini, monkeypatch
):
    (kit_root / "recipes" / "mini-openmpi.toml").write_text(
        mini.replace(
            "source_date_epoch = 1795824000",
            'source_date_epoch = 1795824000\ndebian_snapshot = "20260712T000000Z"',
        )
    )
    r = recipes.load("mini-openmpi")
    asked = []
    monkeypatch.setattr(lock, "debian_index", lambda mirror, suite: asked.append(mirror) or {})
    monkeypatch.setenv("KIT_DEBIAN_MIRROR", "http://mirror.example/debian")
    monkeypatch.delenv("KIT_DEBIAN_SNAPSHOT", raising=False)
    assert lock.gone(r, LOCK) == ["libc6=2.36-9+deb12u14", "python3=3.11.2-1+b1"]
    assert "set KIT_DEBIAN_SNAPSHOT to a Debian snapshot service's archive URL (the recipe " \
        "names the archive as of 20260712T000000Z)" in lock.refusal(r, "cpu", "x")  # fmt: skip
    monkeypatch.setenv("KIT_DEBIAN_SNAPSHOT", "http://snapshot.example/archive/debian")
    lock.gone(r, LOCK)
    assert asked == [
        "http://mirror.example/debian",
        "http://snapshot.example/archive/debian/20260712T000000Z/",
    ]
    said = lock.refusal(r, "cpu", "x")
    assert "check the recipe's debian_snapshot (20260712T000000Z) and KIT_DEBIAN_SNAPSHOT " \
        "(http://snapshot.example/archive/debian/20260712T000000Z/)" in said  # fmt: skip


def test_a_project_page_names_its_one_file_with_the_hash_pip_checks():
    entry = {"name": "packaging", "file": "packaging-26.3-py3-none-any.whl", "sha256": "ab" * 32}
    assert lock.simple_page(entry) == (
        '<html><body><a href="packaging-26.3-py3-none-any.whl#sha256='
        + "ab" * 32
        + '">packaging-26.3-py3-none-any.whl</a></body></html>\n'
    )


def test_the_platforms_are_the_manylinux_tags_of_the_images_glibc_newest_first():
    """A bullseye image (glibc 2.31) runs manylinux_2_31 down to manylinux1, then plain
    linux, in pip's own order (each legacy name after its glibc's): the host's pip must
    take its wheels, not the host's glibc's (cryptography's manylinux_2_34 on bookworm)."""
    tags = lock.platforms({"libc6": "2.31-13+deb11u11", "zlib1g": "1:1.2.11"})[1::2]
    assert tags[:3] == ["manylinux_2_31_x86_64", "manylinux_2_30_x86_64", "manylinux_2_29_x86_64"]
    assert tags[14:16] == ["manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    assert tags[-4:] == ["manylinux_2_6_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64",
                         "linux_x86_64"]  # fmt: skip
    assert len(tags) == (31 - 5 + 1) + 3 + 1  # glibc 2.31 to 2.5, three legacy names, linux
    assert set(lock.platforms({"libc6": "2.31-13"})[::2]) == {"--platform"}
    assert lock.platforms({"libc6": "2.36-9+deb12u14"})[1] == "manylinux_2_36_x86_64"
    with pytest.raises(KitError, match="the image holds no Debian libc6"):
        lock.platforms({"musl": "1.2.3"})


def test_a_wheel_is_fetched_for_the_images_python_and_platforms_an_sdist_for_none(
    kit_root, monkeypatch, tmp_path
):
    ran = []

    def pip(argv, capture_output, text):
        ran.append(argv)
        dest = Path(argv[argv.index("--dest") + 1])
        (dest / "cryptography-50.0.2-cp39-abi3-manylinux_2_28_x86_64.whl").write_bytes(b"w")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(lock.subprocess, "run", pip)
    r = recipes.load("mini-openmpi")
    platform = ["--platform", "manylinux_2_31_x86_64", "--platform", "linux_x86_64"]
    got = lock.download(r, "index", "cryptography==50.0.2", tmp_path / "w", platform)
    assert got["file"] == "cryptography-50.0.2-cp39-abi3-manylinux_2_28_x86_64.whl"
    lock.download(r, "sdist", "mpi4py==3.1.4", tmp_path / "s", [])
    head = ["/usr/bin/python3", "-m", "pip", "download", "--quiet", "--no-deps"]
    assert ran == [
        [*head, "--only-binary=:all:", "--implementation", "cp", "--python-version", "3.11.2",
         "--abi", "cp311", *platform, "--dest", str(tmp_path / "w"), "cryptography==50.0.2"],
        [*head, "--no-binary=:all:", "--dest", str(tmp_path / "s"), "mpi4py==3.1.4"],
    ]  # fmt: skip


def test_a_fetched_file_other_than_the_locked_one_never_enters_the_store(
    kit_root, monkeypatch, tmp_path
):
    """pip served another file for the pin (another build, a re-upload): refused, naming
    both, and the store keeps nothing of it."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))

    def served(r, kind, pin, dest, platform):
        dest.mkdir(parents=True)
        (dest / "packaging-26.3-py3-none-any.whl").write_bytes(b"other bytes")
        return {"file": "packaging-26.3-py3-none-any.whl", "sha256": "f" * 64}

    monkeypatch.setattr(lock, "download", served)
    entry = {"name": "packaging", "version": "26.3", "from": "index",
             "file": "packaging-26.3-py3-none-any.whl", "sha256": "a" * 64}  # fmt: skip
    said = r"pip fetched packaging-26.3-py3-none-any.whl for packaging 26.3, not the locked"
    with pytest.raises(Failed, match=said + r" file \(.*SHA-256 aaaaaaaaaaaa\)"):
        lock.stored(recipes.load("mini-openmpi"), entry, [])
    assert not lock.kept(entry).exists()
    assert not list((tmp_path / "cache").rglob("*.whl"))


def test_a_bundle_copies_each_file_and_refuses_a_store_copy_that_changed(
    kit_root, monkeypatch, tmp_path
):
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    body = b"wheel bytes"
    entry = {"name": "packaging", "version": "26.3", "from": "index",
             "file": "packaging-26.3-py3-none-any.whl",
             "sha256": hashlib.sha256(body).hexdigest()}  # fmt: skip
    held = {"apt": [], "pip": [entry]}
    lock.kept(entry).parent.mkdir(parents=True)
    lock.kept(entry).write_bytes(body)
    r = recipes.load("mini-openmpi")
    assert lock.pip_index(r, held, tmp_path / "b1" / "simple", copy=True) == 1
    copied = tmp_path / "b1" / "simple" / "packaging" / entry["file"]
    assert copied.read_bytes() == body and copied.stat().st_ino != lock.kept(entry).stat().st_ino
    lock.kept(entry).write_bytes(b"rotted")
    with pytest.raises(Failed, match=r"is not the file the lock names \(SHA-256 differs\); "
                       r"remove it and bundle again"):  # fmt: skip
        lock.pip_index(r, held, tmp_path / "b2" / "simple", copy=True)
