"""The native runtime refuses what cannot be the same software as the image."""

import pytest

from kit import native_env, recipes
from kit.errors import KitError


def test_host_suite_from_os_release(tmp_path):
    f = tmp_path / "os-release"
    f.write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_CODENAME=bookworm\n')
    assert native_env.host_suite(f) == "bookworm"
    assert native_env.host_suite(tmp_path / "missing") == ""


def test_an_image_of_another_debian_suite_has_no_native_runtime(monkeypatch):
    monkeypatch.setattr(native_env.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(native_env, "host_suite", lambda: "bookworm")
    with pytest.raises(KitError) as e:
        native_env.ensure(recipes.load("caffe2-mpich"))
    assert str(e.value) == (
        "the native runtime for caffe2-mpich needs a Debian bullseye host (this one is "
        "bookworm): its packages are bullseye's; run its container runtimes"
    )
