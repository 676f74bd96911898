"""A bundle's offline Dockerfile, its index pages, and the check of its files by hash."""

import json
import re
from pathlib import Path

import pytest

from kit import cli
from kit.core.errors import EXIT_FAILED, KitError
from kit.image import bundle

DOCKERFILE = """\
FROM ${BASE_IMAGE}
RUN apt-get update && \\
    apt-get install -y \\
        python3=3.11.2-1+b1 && \\
    rm -rf /var/lib/apt/lists/*
ENV PATH="/opt/kit/venv/bin:/usr/bin:/bin"
RUN --mount=type=secret,id=cacert,target=/run/secrets/cacert python3 -m venv /opt/kit/venv && \\
    /opt/kit/venv/bin/pip install packaging==26.3
COPY benchmarks /opt/kit/benchmarks
"""

OFFLINE = """\
FROM ${BASE_IMAGE}
RUN --mount=type=bind,source=.kit-bundle/srv,target=/srv \
--mount=type=bind,source=.kit-bundle/sources.list,target=/etc/apt/sources.list apt-get update && \\
    apt-get install -y \\
        python3=3.11.2-1+b1 && \\
    rm -rf /var/lib/apt/lists/*
ENV PATH="/opt/kit/venv/bin:/usr/bin:/bin"
RUN --mount=type=bind,source=.kit-bundle/srv,target=/srv \
--mount=type=secret,id=cacert,target=/run/secrets/cacert python3 -m venv /opt/kit/venv && \\
    /opt/kit/venv/bin/pip install packaging==26.3
COPY benchmarks /opt/kit/benchmarks
"""


def test_the_offline_dockerfile_adds_only_mounts_which_no_history_line_keeps():
    assert bundle.offline_dockerfile(DOCKERFILE) == OFFLINE


@pytest.fixture
def made(tmp_path) -> Path:
    """A bundle folder of two files and its manifest."""
    folder = tmp_path / "b"
    (folder / "context" / "benchmarks").mkdir(parents=True)
    (folder / "context" / "benchmarks" / "x.py").write_text("print(1)\n")
    (folder / "base.tar").write_bytes(b"tar")
    held = {
        "format": bundle.FORMAT,
        "recipe": "tiny-mpich",
        "version": "0.1.0",
        "variant": "cpu",
        "tag": "kit/tiny-mpich:0.1.0-cpu",
        "epoch": 1795824000,
        "digest": "sha256:" + "0" * 64,
        "dockerfile": "containers/tiny-mpich/Dockerfile",
        "base": {"tag": "kit/debian:bookworm-aa", "id": "sha256:" + "a" * 64},
        "files": bundle._tree(folder),
    }
    (folder / bundle.MANIFEST).write_text(json.dumps(held))
    return folder


def test_an_intact_bundle_reads(made):
    assert bundle.read(made)["recipe"] == "tiny-mpich"


@pytest.mark.parametrize(
    "damage, said",
    [
        (lambda f: (f / "base.tar").write_bytes(b"other"),
         "base.tar is not the file the bundle holds (SHA-256 differs)"),
        (lambda f: (f / "base.tar").unlink(), "base.tar is missing from the bundle"),
        (lambda f: (f / "extra.deb").write_bytes(b""),
         "extra.deb is not one of the bundle's files; remove it"),
        (lambda f: (f / bundle.MANIFEST).write_text("{}"), "is no kit.bundle/1 manifest"),
        (lambda f: (f / bundle.MANIFEST).unlink(), "holds no bundle.json"),
        (lambda f: (f / bundle.MANIFEST).write_text(
            (f / bundle.MANIFEST).read_text().replace('"files": {', '"files": [0], "x": {')),
         "is no kit.bundle/1 manifest"),
        (lambda f: (f / bundle.MANIFEST).write_text(
            (f / bundle.MANIFEST).read_text().replace('"epoch": 1795824000', '"epoch": true')),
         "is no kit.bundle/1 manifest"),
    ],
)  # fmt: skip
def test_a_damaged_bundle_is_named_before_anything_is_built(made, damage, said):
    damage(made)
    with pytest.raises(KitError, match=re.escape(said)):
        bundle.read(made)


def test_a_bundle_of_another_image_is_refused_before_the_engine_is_asked(made, monkeypatch):
    monkeypatch.setattr(bundle, "_base", lambda *a: pytest.fail("the engine was asked"))
    with pytest.raises(KitError, match=r"is the bundle of tiny-mpich \(cpu\), not pytorch-mpich"):
        bundle.rebuild("pytorch-mpich", "cpu", made)


def test_a_rebuild_that_is_another_image_exits_1_and_names_both(monkeypatch, capsys, tmp_path):
    held = {"digest": "sha256:" + "1" * 64}
    other = "sha256:" + "2" * 64
    monkeypatch.setattr(bundle, "rebuild", lambda *a: (other, "kit-bundle/x:1-cpu", held))
    assert cli.main(["build", "pytorch-mpich", "--from-bundle", str(tmp_path)]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err.startswith("kit: error: the bundle's rebuild is sha256:222222222222, not ")
    assert "kit verify pytorch-mpich --against kit-bundle/x:1-cpu" in err


def test_a_fetched_file_that_is_not_the_locked_one_is_a_failure_not_a_mistake(tmp_path):
    """The mirror served other bytes under a locked name: what ran failed (exit 1); nothing
    the user typed was wrong (exit 2)."""
    served = tmp_path / "served.deb"
    served.write_bytes(b"not the locked package")
    with pytest.raises(KitError, match="is not the file the lock names") as e:
        bundle._fetch(served.as_uri(), tmp_path / "kept.deb", "0" * 64)
    assert e.value.status == EXIT_FAILED
