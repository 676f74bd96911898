"""The flattened root file system both squashfs consumers read."""

import io
import tarfile

from kit.image import rootfs


def tar_of(entries: dict[str, bytes | None]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            info.uid = 1000
            info.mtime = 2_000_000_000  # later than the image (a container's own files)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


EPOCH = 1795824000


def flattened(entries: dict[str, bytes | None]) -> dict[str, tarfile.TarInfo]:
    out = io.BytesIO()
    rootfs.flatten(tar_of(entries), out, {".singularity.d/runscript": b"#!/bin/sh\n"}, EPOCH)
    out.seek(0)
    with tarfile.open(fileobj=out) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert len(names) == len(set(names)), names  # every path once
    return {m.name: m for m in members}


def test_an_image_from_scratch_gets_the_mount_points_ch_run_binds_onto():
    got = flattened({"loop": b"\x7fELF", "dev": None, "dev/null": b"", "etc/hostname": b""})
    for path in ("etc/passwd", "etc/group", "etc/hosts", "etc/resolv.conf"):
        assert got[path].isreg() and got[path].size == 0
    for path in ("proc", "sys", "mnt", "home", "dev"):
        assert got[path].isdir()
    assert got["tmp"].mode == 0o1777 and "dev/null" not in got
    assert {m.uid for m in got.values()} == {0}  # every file root's, as Shifter's gateway makes


def test_an_image_that_has_them_keeps_its_own():
    got = flattened({"etc": None, "etc/passwd": b"root:x:0:0::/root:/bin/sh\n", "tmp": None})
    assert got["etc/passwd"].size == 26 and got["tmp"].mode != 0o1777


def test_the_flattened_tree_is_dated_no_later_than_the_image():
    """docker export adds the container's own mount points (/etc/hostname, /.dockerenv)
    dated when it was created: the same image must still give the same stream."""
    got = flattened({"etc/hostname": b"", "usr/bin/x": b"x"})
    assert {m.mtime for m in got.values()} <= {0, EPOCH}
    assert got["etc/hostname"].mtime == EPOCH
