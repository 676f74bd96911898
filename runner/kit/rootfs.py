"""Flatten an image's file system once, as the stream both squashfs consumers read.

`docker export` gives the merged root file system as a tar stream; this rewrites it
on the way to the squashfs packer: every file owned by root (what Shifter's image
gateway does), no device nodes, and Apptainer's metadata folder added (the image's
environment, labels and run script), so one compressed file serves Shifter,
Charliecloud and, wrapped in a SIF, Apptainer.
"""

import io
import json
import shlex
import tarfile
from typing import IO


def apptainer_files(config: dict) -> dict[str, bytes]:
    """/.singularity.d files from a Docker image config: what `apptainer build` writes."""
    env = [e.partition("=") for e in config.get("Env") or []]
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, _, v in env if k)
    command = [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]
    run = " ".join(shlex.quote(c) for c in command) if command else "/bin/sh"
    return {
        ".singularity.d/env/10-docker2singularity.sh": f"#!/bin/sh\n{exports}".encode(),
        ".singularity.d/runscript": f'#!/bin/sh\nexec {run} "$@"\n'.encode(),
        ".singularity.d/labels.json": (
            json.dumps(config.get("Labels") or {}, indent=2, sort_keys=True) + "\n"
        ).encode(),
    }


def _owned_by_root(member: tarfile.TarInfo) -> tarfile.TarInfo:
    member.uid = member.gid = 0
    member.uname = member.gname = "root"
    return member


def _entry(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode = kind, mode
    return info


def flatten(src: IO[bytes], dst: IO[bytes], extra: dict[str, bytes]) -> None:
    """Copy the tar stream src to dst, every entry owned by root, without dev/*, then add
    extra files (and their folders) at the end."""
    with (
        tarfile.open(fileobj=src, mode="r|") as source,
        tarfile.open(fileobj=dst, mode="w|", format=tarfile.PAX_FORMAT) as out,
    ):
        seen = set()
        for member in source:
            name = member.name.removeprefix("./").rstrip("/")
            if name == "dev" and member.isdir():
                out.addfile(_owned_by_root(member))  # the folder stays: runtimes mount onto it
                continue
            if name.startswith("dev/"):
                continue
            seen.add(name)
            data = source.extractfile(member) if member.isreg() else None
            out.addfile(_owned_by_root(member), data)
        for path, data in sorted(extra.items()):
            parts = path.split("/")
            for i in range(1, len(parts)):
                folder = "/".join(parts[:i])
                if folder not in seen:
                    seen.add(folder)
                    out.addfile(_owned_by_root(_entry(folder, tarfile.DIRTYPE, 0o755)))
            info = _entry(path, tarfile.REGTYPE, 0o755)
            info.size = len(data)
            out.addfile(_owned_by_root(info), io.BytesIO(data))
