"""Flatten an image's file system once, as the stream both squashfs consumers read.

`docker export` gives the merged root file system as a tar stream; this rewrites it
on the way to the squashfs packer: every file owned by root (what Shifter's image
gateway does), no device nodes, and Apptainer's metadata folder added (the image's
environment, labels and run script), so one compressed file serves Shifter,
Charliecloud and, wrapped in a SIF, Apptainer.
"""

import io
import json
import os
import shlex
import subprocess
import tarfile
from pathlib import Path
from typing import IO

from kit.core.errors import Failed
from kit.image import reproducible

Extra = dict[str, bytes | str | None]  # path -> file content, symlink target, or folder


# The definition the empty sandbox was built from: it names that run's scratch folder
# (a squashfs made twice differed in this file alone), and says nothing of the image.
BUILT_FROM = ".singularity.d/Singularity"


def apptainer_skeleton(apptainer: str, scratch: Path) -> Extra:
    """Apptainer's own runtime files (action scripts, base environment that carries
    --env into the container, ...) as the installed Apptainer writes them: it builds an
    empty sandbox (0.1 s) and its /.singularity.d and top-level links are taken."""
    empty, box = scratch / "empty", scratch / "box"
    empty.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(
        [apptainer, "build", "--force", "--sandbox", str(box), str(empty)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        tail = (made.stderr.strip().splitlines() or ["no output"])[-1]
        raise Failed(f"apptainer could not make its metadata skeleton: {tail}")
    out: Extra = {}
    for path in sorted(box.rglob("*")):
        rel = path.relative_to(box).as_posix()
        if not (rel.startswith(".singularity.d") or (path.is_symlink() and "/" not in rel)):
            continue
        if rel == BUILT_FROM:
            continue
        if path.is_symlink():
            out[rel] = os.readlink(path)
        elif path.is_dir():
            out[rel] = None
        else:
            out[rel] = path.read_bytes()
    return out


def apptainer_files(config: dict, skeleton: Extra | None = None) -> Extra:
    """/.singularity.d from a Docker image config, over Apptainer's own skeleton: the
    image's environment, labels and run script, as `apptainer build` would write them."""
    env = [e.partition("=") for e in config.get("Env") or []]
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, _, v in env if k)
    command = [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]
    run = " ".join(shlex.quote(c) for c in command) if command else "/bin/sh"
    return {
        **(skeleton or {}),
        ".singularity.d/env/10-docker2singularity.sh": f"#!/bin/sh\n{exports}".encode(),
        ".singularity.d/runscript": f'#!/bin/sh\nexec {run} "$@"\n'.encode(),
        ".singularity.d/labels.json": (
            json.dumps(config.get("Labels") or {}, indent=2, sort_keys=True) + "\n"
        ).encode(),
    }


def _owned_by_root(member: tarfile.TarInfo, epoch: int = 0) -> tarfile.TarInfo:
    """The entry owned by root, in the reproducible form of a layer's entries, dated no
    later than the image (a container's own mount points, which `docker export` adds,
    carry the time it was created)."""
    member = reproducible.normal_member(member, epoch)
    member.uid = member.gid = 0
    member.uname = member.gname = "root"
    return member


def _entry(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode = kind, mode
    return info


# What ch-run binds onto in a read-only image (it never makes a mount point): an image
# FROM scratch lacks them, a distribution's has them all. Added only where missing.
MOUNT_POINTS: dict[str, tuple[bytes, int]] = {
    **{f"etc/{f}": (tarfile.REGTYPE, 0o644) for f in ("passwd", "group", "hosts", "resolv.conf")},
    **{d: (tarfile.DIRTYPE, 0o755) for d in ("dev", "proc", "sys", "mnt", "home")},
    "tmp": (tarfile.DIRTYPE, 0o1777),
}


def flatten(src: IO[bytes], dst: IO[bytes], extra: Extra, epoch: int) -> None:
    """Copy the tar stream src to dst, every entry owned by root and dated no later than
    `epoch` (the image's creation), without dev/* and without what extra replaces, then
    add extra's files, links and folders at the end, and the mount points the image lacks
    (MOUNT_POINTS): the same image gives the same stream."""
    with (
        tarfile.open(fileobj=src, mode="r|") as source,
        tarfile.open(fileobj=dst, mode="w|", format=tarfile.PAX_FORMAT) as out,
    ):
        seen = set()
        for member in source:
            name = member.name.removeprefix("./").rstrip("/")
            if name == "dev" and member.isdir():
                seen.add(name)
                out.addfile(_owned_by_root(member, epoch))  # runtimes mount onto it
                continue
            if name.startswith("dev/") or name in extra:
                continue
            seen.add(name)
            data = source.extractfile(member) if member.isreg() else None
            out.addfile(_owned_by_root(member, epoch), data)
        for path, data in sorted(extra.items()):
            parts = path.split("/")
            for i in range(1, len(parts)):
                folder = "/".join(parts[:i])
                if folder not in seen:
                    seen.add(folder)
                    out.addfile(_owned_by_root(_entry(folder, tarfile.DIRTYPE, 0o755)))
            seen.add(path)
            if data is None:
                out.addfile(_owned_by_root(_entry(path, tarfile.DIRTYPE, 0o755)))
            elif isinstance(data, str):
                link = _entry(path, tarfile.SYMTYPE, 0o777)
                link.linkname = data
                out.addfile(_owned_by_root(link))
            else:
                info = _entry(path, tarfile.REGTYPE, 0o755)
                info.size = len(data)
                out.addfile(_owned_by_root(info), io.BytesIO(data))
        for path, (kind, mode) in MOUNT_POINTS.items():
            folder = path.rpartition("/")[0]
            if folder and folder not in seen:
                seen.add(folder)
                out.addfile(_owned_by_root(_entry(folder, tarfile.DIRTYPE, 0o755)))
            if path not in seen:
                out.addfile(_owned_by_root(_entry(path, kind, mode)), io.BytesIO(b""))
