"""The native runtime refuses what cannot be the same software as the image."""

import os

import pytest

from kit.core.errors import KitError
from kit.image import engine, recipes
from kit.runtimes import native_env


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


def test_a_pin_the_host_lacks_is_refused_with_the_fix(kit_root, mini, monkeypatch):
    """The same-software guarantee, against a dpkg database given here: the host has the
    recipe's Open MPI but another python3 than the recipe pins."""
    monkeypatch.setattr(native_env, "host_suite", lambda: "bookworm")
    monkeypatch.setattr(native_env.shutil, "which", lambda name: f"/usr/bin/{name}")
    (kit_root / "recipes" / "mini-openmpi.toml").write_text(
        mini.replace('"python3=3.11.2-1+b1"', '"python3=0.0.1-kit"')
    )
    pins = dict(p.split("=", 1) for p in recipes.load("mini-openmpi").native_apt)
    host = {**pins, "python3": "3.11.2-1+b1"}
    monkeypatch.setattr(native_env, "host_versions", lambda names: {n: host.get(n) for n in names})
    with pytest.raises(KitError) as e:
        native_env.ensure(recipes.load("mini-openmpi"))
    assert str(e.value) == (
        "native environment for mini-openmpi needs the image's packages on the host: "
        "python3=0.0.1-kit (host: 3.11.2-1+b1); "
        "as root: apt-get install --no-install-recommends python3=0.0.1-kit"
    )


def test_a_built_environment_keeps_saying_where_its_compiled_packages_came_from(
    tmp_path, monkeypatch
):
    """The records' digest for native names the image whose wheels it installed, run
    after run, without rebuilding; a rebuilt image (another id) makes it again."""
    monkeypatch.setenv("KIT_CACHE", str(tmp_path))
    dpkg = tmp_path / "dpkg-query"  # a Debian host, injected: its answers are too
    dpkg.write_text("#!/bin/sh\nexit 99\n")
    dpkg.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(native_env, "host_suite", lambda: "bookworm")
    monkeypatch.setattr(native_env, "mismatches", lambda r: [])
    r = recipes.load("horovod-mpich")
    venv = tmp_path / "native" / f"horovod-mpich-{r.version}"
    venv.mkdir(parents=True)
    origin = f"wheels of {r.tag()} sha256:0123"
    (venv / ".kit-pins").write_text(f"{native_env.fingerprint(r)}\n{origin}")
    local = {"Id": "sha256:0123"}
    monkeypatch.setattr(native_env.engine, "found", lambda tag: local)
    python, identity = native_env.ensure(r)
    assert python == venv / "bin" / "python"
    assert identity == f"{native_env.fingerprint(r)} ({origin})"

    def rebuilt(argv, what, **kw):
        raise RuntimeError(what)

    monkeypatch.setattr(native_env, "stream", rebuilt)
    local["Id"] = "sha256:4567"
    with pytest.raises(RuntimeError, match="native venv"):
        native_env.ensure(r)


def test_no_engine_means_no_image_wheels(tmp_path, monkeypatch):
    """Then the caller compiles: a cluster without Docker still gets a native runtime."""
    monkeypatch.setenv("KIT_DOCKER", str(tmp_path / "no-docker"))
    engine.docker.cache_clear()
    try:
        assert native_env.image_wheels("kit/horovod-mpich:1.2.0-cpu", tmp_path) is None
    finally:
        engine.docker.cache_clear()
