"""The exact docker build command line."""

from pathlib import Path

import pytest

from kit import build, engine, recipes
from kit.errors import KitError


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
