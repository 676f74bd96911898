"""The exact docker build command line."""

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


def test_label_pass_reuses_the_first_builds_cache():
    first = ["docker", "build", "-t", "kit/x:1-cpu", "--no-cache", "/repo"]
    assert build.label_argv(first, ["KIT_APT_PACKAGES=a=1 b=2", "KIT_PIP_PACKAGES=c==3"]) == [
        "docker",
        "build",
        "-t",
        "kit/x:1-cpu",
        "--build-arg",
        "KIT_APT_PACKAGES=a=1 b=2",
        "--build-arg",
        "KIT_PIP_PACKAGES=c==3",
        "/repo",
    ]


def test_first_pass_is_untagged_until_the_labels_are_in():
    """A `kit run` beside the build must not find the tag on the unlabelled image."""
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
