"""A foreign image's files read from outside: a docker save archive's manifest, checked
as docker load reads it, and the cached answer to which MPI the image carries."""

import io
import json
import tarfile

import pytest

from kit.core.errors import KitError
from kit.image import foreign
from kit.image.foreign import Foreign

CONFIG = "0123abcd.json"


def archive(path, manifest, members=(CONFIG, "layer/layer.tar")):
    """A tar holding manifest.json (bytes as given, or JSON) and the named members."""
    data = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    with tarfile.open(path, "w") as tar:
        for name, content in [("manifest.json", data), *((m, b"{}") for m in members)]:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return path


GOOD = [{"Config": CONFIG, "RepoTags": ["train:1"], "Layers": ["layer/layer.tar"]}]


def test_a_docker_save_archive_plans_without_an_engine(tmp_path):
    image = foreign.resolve(str(archive(tmp_path / "i.tar", GOOD)))
    assert (image.ref, image.digest) == ("train:1", "sha256:0123abcd")


@pytest.mark.parametrize(
    ("manifest", "said"),
    [
        ({"Config": CONFIG}, "its manifest.json lists no image"),
        ([{"Layers": []}], "its manifest.json has an image without its config"),
        ([{**GOOD[0], "Layers": "layer.tar"}], f"its manifest.json lists no layers of {CONFIG}"),
        (
            [{**GOOD[0], "Layers": ["gone/layer.tar"]}],
            "its manifest.json names gone/layer.tar, which the archive does not hold",
        ),
        ([{**GOOD[0], "RepoTags": ["a\nb"]}], "its manifest.json has a tag that is not an image"),
        (b"[" * 100_000, "its manifest.json: JSON nested deeper than 64 levels"),
        (b"\xff", "its manifest.json: not UTF-8 text (byte 0)"),
    ],
)
def test_a_bogus_manifest_is_refused_before_docker_load(tmp_path, manifest, said):
    """The dry run and the run both refuse it here: docker load is never reached."""
    path = archive(tmp_path / "i.tar", manifest)
    with pytest.raises(KitError) as e:
        foreign.resolve(str(path))
    assert str(e.value).startswith(
        f"--image '{path}' is a tar file but not a docker save archive: {said}"
    )


@pytest.mark.parametrize("ref", ["--privileged", "-v/:/host", "a b", "x;rm -rf ~"])
def test_an_engine_reference_that_is_no_image_name_is_refused_before_docker_sees_it(
    ref, monkeypatch
):
    """docker:--privileged reached `docker image inspect --privileged` (an unknown flag, said
    as an engine that did not answer) and would have been an option of docker run."""
    monkeypatch.setattr(foreign.engine, "inspect", lambda r: pytest.fail(f"inspected {r!r}"))
    with pytest.raises(KitError) as e:
        foreign.resolve(f"docker:{ref}")
    assert str(e.value) == (
        f"--image 'docker:{ref}': '{ref}' is not an image reference (a name[:tag], an id); "
        "docker images lists them"
    )


@pytest.fixture
def image(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    img = Foreign("docker:x", "engine", "x", "sha256:" + "ab" * 32)
    img.folder().mkdir(parents=True)
    listing = "squashfs-root/usr/lib/libmpi.so.40\nsquashfs-root/usr/bin/orted\n"
    listed = []
    monkeypatch.setattr(foreign, "which", lambda name, fix: name)
    monkeypatch.setattr(foreign, "squashfs", lambda i: img.folder() / "image.sqfs")
    monkeypatch.setattr(foreign, "capture", lambda argv, what: listed.append(argv) or listing)
    return img, listed


@pytest.mark.parametrize("cached", ['{"flavour": "openmpi", "libr', "[" * 100_000, '"mpich"', ""])
def test_a_corrupt_cached_answer_is_a_miss_derived_again_and_written_whole(image, cached):
    img, listed = image
    (img.folder() / "mpi.json").write_text(cached)
    mpi, library = foreign.mpi_of(img)
    assert (mpi.flavour, library, len(listed)) == ("openmpi", "/usr/lib/libmpi.so.40", 1)
    saved = json.loads((img.folder() / "mpi.json").read_text())
    assert saved == {"flavour": "openmpi", "library": "/usr/lib/libmpi.so.40"}
    assert foreign.mpi_of(img)[1] == library and len(listed) == 1  # now a hit
    assert sorted(p.name for p in img.folder().iterdir()) == ["mpi.json"]  # no temp file


def test_no_mpi_is_an_answer_too(image, monkeypatch):
    img, listed = image
    monkeypatch.setattr(foreign, "capture", lambda argv, what: listed.append(argv) or "")
    assert foreign.mpi_of(img) is None and foreign.mpi_of(img) is None
    assert len(listed) == 1 and (img.folder() / "mpi.json").read_text() == "{}\n"
