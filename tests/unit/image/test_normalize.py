"""kit normalize: what a definition-built SIF is written with, and its one-line refusals."""

import json
import struct

import pytest

from kit import cli
from kit.core.errors import KitError
from kit.image import normalize, sif

EPOCH = 1795824000  # 2026-11-28 00:00:00 UTC


def test_the_build_stamped_labels_become_the_epochs_date_and_the_definitions_base():
    built = {
        "kit.recipe": "pytorch-mpich",
        "kit.source-date-epoch": "1795824000",
        "org.label-schema.build-date": "Saturday_28_November_2026_13:58:53_UTC",
        "org.label-schema.usage.singularity.deffile.from": "/home/u/base.sif",
        "org.label-schema.usage.apptainer.version": "1.4.1",
    }
    assert json.loads(normalize.labels(json.dumps(built, indent="\t"), EPOCH)) == {
        **built,
        "org.label-schema.build-date": "Saturday_28_November_2026_0:00:00_UTC",
        "org.label-schema.usage.singularity.deffile.from": "{{ BASE_SIF }}",
    }
    assert normalize.labels('{"b": "2", "a": "1"}', EPOCH) == '{\n  "a": "1",\n  "b": "2"\n}\n'


def test_the_kept_definition_names_its_base_as_rendered():
    kept = "Bootstrap: localimage\nFrom: /tmp/x/base.sif\n\n%post\n    echo 'From: y'\n"
    assert normalize.definition(kept) == (
        "Bootstrap: localimage\nFrom: {{ BASE_SIF }}\n\n%post\n    echo 'From: y'\n"
    )


def sif_bytes(descriptors: list[tuple[int, int, int, int]], fs: int = 1) -> bytes:
    """A SIF's header and descriptors (data type, partition type, offset, length), each
    partition of file system type fs (1: squashfs), and data up to byte 3000."""
    head = bytearray(sif.DATA_OFFSET + 8)
    head[32:41] = sif.MAGIC
    first = len(head)
    struct.pack_into("<qq", head, sif.DESCRIPTORS_TOTAL, len(descriptors), first)
    table = bytearray(len(descriptors) * sif.DESCRIPTOR_SIZE)
    for i, (kind, part, offset, length) in enumerate(descriptors):
        base = i * sif.DESCRIPTOR_SIZE
        struct.pack_into("<i", table, base, kind)
        table[base + sif.USED] = 1
        struct.pack_into("<qq", table, base + sif.FILE_AT, offset, length)
        struct.pack_into("<ii", table, base + sif.EXTRA_AT, fs, part)
    data = bytes(head + table)
    return data + bytes(3000 - len(data))


def test_the_file_system_is_the_primary_partition_whatever_comes_before_it(tmp_path):
    path = tmp_path / "a.sif"
    path.write_bytes(
        sif_bytes([(0x4001, 0, 2700, 40), (0x4004, 3, 2800, 9), (0x4004, 2, 2900, 99)])
    )
    assert sif.primary_partition(path) == (2900, 99)
    path.write_bytes(sif_bytes([(0x4001, 0, 2700, 40)]))
    with pytest.raises(KitError, match=r"a.sif' holds no file system partition; give a SIF"):
        sif.primary_partition(path)
    path.write_bytes(sif_bytes([(0x4004, 2, 2900, 99)], fs=2))
    with pytest.raises(KitError, match=r"a.sif' is not a squashfs image"):
        sif.primary_partition(path)
    path.write_bytes(sif_bytes([(0x4004, 2, 2900, 101)]))
    with pytest.raises(KitError, match=r"a.sif' is cut short: its file system ends past"):
        sif.primary_partition(path)
    path.write_bytes(b"#!/bin/sh\n" * 20)
    with pytest.raises(KitError, match=r"a.sif' is not a SIF file; give a SIF file"):
        sif.primary_partition(path)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["nope.sif", "--out", "o.sif"], "'nope.sif' is not a file; give the SIF apptainer build"),
        (["a.sif", "--out", "a.sif"], "--out 'a.sif' is the SIF it reads; give another path"),
        (["a.sif", "--out", "no/o.sif"], "--out 'no/o.sif': folder 'no' does not exist; create"),
    ],
)
def test_a_wrong_path_is_one_line_before_anything_is_read(
    args, said, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.sif").write_bytes(b"x")
    assert cli.main(["normalize", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kit: error: {said}") and err.count("\n") == 1, err
