"""A recipe's host wheels: fetched by the host's pip for the image's Python, found by pin."""

import dataclasses

import pytest

from kit.core.errors import KitError
from kit.image import recipes, wheels


def test_the_hosts_pip_is_asked_for_the_images_python_and_the_pins_file_is_found(
    tmp_path, monkeypatch
):
    r = recipes.load("pytorch2-mpich")
    monkeypatch.setattr(wheels, "repo_root", lambda: tmp_path)
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    asked = []

    def download(argv, what):
        asked.append(argv)
        name = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
        (tmp_path / wheels.CONTEXT / name).write_bytes(b"")
        return ""

    monkeypatch.setattr(wheels, "capture", download)
    (tmp_path / wheels.CONTEXT).mkdir()
    (tmp_path / wheels.CONTEXT / "torch-2.12.0+cpu-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
    (found,) = wheels.fetch(r)
    assert found.name.startswith("torch-2.13.0+cpu-cp311")
    (argv,) = asked
    assert argv[:3] == [wheels.HOST_PYTHON, "-m", "pip"] and argv[-1] == "torch==2.13.0+cpu"
    assert argv[argv.index("--python-version") + 1] == "3.11.2" and "cp311" in argv
    assert wheels.fetch(r) == [found] and len(asked) == 1  # present: not fetched again


def test_a_pin_pip_cannot_fetch_names_the_setting_that_fixes_it(tmp_path, monkeypatch):
    r = recipes.load("pytorch2-mpich")
    monkeypatch.setattr(wheels, "repo_root", lambda: tmp_path)
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))

    def fails(argv, what):
        raise KitError(f"{what} failed (exit 1): ERROR: No matching distribution found")

    monkeypatch.setattr(wheels, "capture", fails)
    with pytest.raises(KitError, match=r"installs torch==2.13.0\+cpu from the host's pip.*"
                       r"PIP_EXTRA_INDEX_URL"):  # fmt: skip
        wheels.fetch(r)
    python = dataclasses.replace(r, apt=("python3-dev=3.11.2-1+b1",))
    with pytest.raises(KitError, match="needs the image's Python pinned"):
        wheels.fetch(python)
