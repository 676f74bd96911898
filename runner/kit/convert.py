"""`kit convert`: Docker image -> SIF, Shifter squashfs (+ metadata), docker-save tar.

Everything is filed under the image's content digest, so converting an
unchanged image again does no work and a rebuilt image never reuses a stale SIF.
"""

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import engine
from .errors import KitError
from .paths import cache_dir
from .proc import stream, which
from .recipes import Recipe

APPTAINER_FIX = "install Apptainer (on this kind of machine: ci/provision)"
FORMATS = {
    "singularity": "singularity",
    "apptainer": "singularity",
    "sif": "singularity",
    "shifter": "shifter",
    "charliecloud": "shifter",
    "docker-archive": "docker-archive",
}


@dataclass(frozen=True)
class Artifacts:
    digest: str
    dir: Path

    @property
    def tar(self) -> Path:
        return self.dir / "image.tar"

    @property
    def sif(self) -> Path:
        return self.dir / "image.sif"

    @property
    def squashfs(self) -> Path:
        return self.dir / "image.sqfs"

    @property
    def meta(self) -> Path:
        return self.dir / "image.meta.json"


def artifacts(recipe: Recipe, variant: str) -> Artifacts:
    digest = engine.image_id(recipe.tag(variant))
    return Artifacts(digest, cache_dir() / "images" / recipe.name / digest.split(":")[-1][:16])


def parse_formats(spec: str) -> list[str]:
    out = []
    for name in (s.strip() for s in spec.split(",") if s.strip()):
        if name not in FORMATS:
            raise KitError(f"unknown format '{name}' for --to (known: {', '.join(FORMATS)})")
        out.append(FORMATS[name])
    if not out:
        raise KitError("--to needs a format, e.g. --to singularity,shifter")
    return out


def convert(recipe: Recipe, variant: str, formats: list[str]) -> Artifacts:
    """Make each requested format once per digest; print what was made or reused."""
    art = artifacts(recipe, variant)
    art.dir.mkdir(parents=True, exist_ok=True)
    tag = recipe.tag(variant)
    steps = {
        "docker-archive": (art.tar, _save),
        "singularity": (art.sif, _sif),
        "shifter": (art.squashfs, _squashfs),
    }
    for fmt in dict.fromkeys(formats):
        target, make = steps[FORMATS[fmt]]
        if target.exists():
            print(f"{fmt}: {target} (cached for {art.digest[:19]})", file=sys.stderr)
            continue
        if fmt == "singularity" and not art.tar.exists():
            _save(tag, art)
        t0 = time.monotonic()
        make(tag, art)
        print(f"{fmt}: {target} made in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    if "shifter" in formats and not art.tar.exists():
        _save(tag, art)  # what CSCS-style `shifter load` takes
    return art


def _save(tag: str, art: Artifacts) -> None:
    tmp = art.tar.with_suffix(".tar.part")
    stream([engine.docker(), "save", "-o", str(tmp), tag], "docker save")
    tmp.rename(art.tar)


def _sif(tag: str, art: Artifacts) -> None:
    apptainer = which("apptainer", APPTAINER_FIX)
    tmp = art.sif.with_suffix(".sif.part")
    stream(
        [apptainer, "build", "--force", str(tmp), f"docker-archive://{art.tar}"], "apptainer build"
    )
    tmp.rename(art.sif)


def _squashfs(tag: str, art: Artifacts) -> None:
    """What Shifter's image gateway makes: the flattened root file system, all owned by
    root, plus the image's entrypoint, command, working directory and environment."""
    mksquashfs = which("mksquashfs", "install squashfs-tools")
    tree = art.dir / "rootfs.part"
    _rmtree(tree)
    tree.mkdir()
    name = f"kit-export-{os.getpid()}"
    try:
        engine.run_quiet(["create", "--name", name, tag], "docker create")
        export = subprocess.Popen([engine.docker(), "export", name], stdout=subprocess.PIPE)
        untar = subprocess.run(
            [
                "tar",
                "-x",
                "-C",
                str(tree),
                "--no-same-owner",
                "--delay-directory-restore",
                "--exclude=dev/*",
            ],
            stdin=export.stdout,
            capture_output=True,
            text=True,
        )
        export.stdout.close()
        if export.wait() != 0 or untar.returncode != 0:
            raise KitError(f"flattening {tag} failed: {untar.stderr.strip()[-300:]}")
    finally:
        subprocess.run([engine.docker(), "rm", "-f", name], capture_output=True)
    tmp = art.squashfs.with_suffix(".sqfs.part")
    tmp.unlink(missing_ok=True)
    try:
        stream([mksquashfs, str(tree), str(tmp), "-all-root", "-noappend", "-quiet"], "mksquashfs")
    finally:
        _rmtree(tree)
    config = (engine.inspect(tag) or {}).get("Config") or {}
    meta = {
        "image": tag,
        "digest": art.digest,
        "entrypoint": config.get("Entrypoint"),
        "cmd": config.get("Cmd"),
        "workdir": config.get("WorkingDir") or "/",
        "env": config.get("Env") or [],
    }
    art.meta.write_text(json.dumps(meta, indent=2) + "\n")
    tmp.rename(art.squashfs)


def _rmtree(path: Path) -> None:
    """Remove a tree extracted as an ordinary user, read-only directories included."""

    def unlock(func, p, _exc):
        os.chmod(os.path.dirname(p), stat.S_IRWXU)
        func(p)

    if path.exists():
        shutil.rmtree(path, onerror=unlock)
