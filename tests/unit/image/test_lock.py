"""The lock: what an image holds, read from the mirror's index, and checked after a build."""

import lzma

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
