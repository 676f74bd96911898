"""`kit convert`: Docker image -> SIF, Shifter squashfs (+ metadata), docker-save tar.

Everything is filed under the image's content digest, so converting an
unchanged image again does no work and a rebuilt image never reuses a stale SIF.
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kit.core.errors import KitError
from kit.core.paths import cache_dir, exclusive, write_atomically
from kit.core.proc import capture, stream, which
from kit.image import engine, rootfs
from kit.image.recipes import Recipe

APPTAINER_FIX = "install Apptainer (on this kind of machine: ci/provision)"
FORMATS = {
    "singularity": "singularity",
    "apptainer": "singularity",
    "sif": "singularity",
    "shifter": "shifter",  # the squashfs and metadata, plus the tar `shifter load` takes
    "charliecloud": "squashfs",
    "squashfs": "squashfs",
    "docker-archive": "docker-archive",
}


MANIFEST = "manifest.json"  # beside an image's conversions: its digest, contents, timings


@dataclass(frozen=True)
class Artifacts:
    digest: str
    dir: Path

    @property
    def manifest(self) -> Path:
        return self.dir / MANIFEST

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


def earlier(recipe: Recipe, variant: str, fmt: str) -> Artifacts | None:
    """When no engine answers: the newest conversion of this recipe version and variant
    in the cache that holds `fmt` (a SIF serves Apptainer, a squashfs Charliecloud; none
    of them needs the engine to run), said on stderr. None when the engine answers."""
    if engine.answers():
        return None
    found = []
    for manifest in (cache_dir() / "images" / recipe.name).glob(f"*/{MANIFEST}"):
        try:
            m = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(m, dict) or not isinstance(m.get("digest"), str):
            continue
        art = Artifacts(m["digest"], manifest.parent)
        made = {"singularity": art.sif, "squashfs": art.squashfs}[FORMATS[fmt]]
        same = (m.get("recipe_version"), m.get("variant")) == (recipe.version, variant)
        if same and made.is_file():
            found.append((made.stat().st_mtime, art, made))
    if not found:
        return None
    _, art, made = max(found, key=lambda x: x[0])
    print(
        f"no Docker engine answers: using {made}, converted earlier from "
        f"{recipe.tag(variant)} ({art.digest[:19]})",
        file=sys.stderr,
    )
    return art


def parse_formats(spec: str) -> list[str]:
    out = []
    for name in (s.strip() for s in spec.split(",") if s.strip()):
        if name not in FORMATS:
            raise KitError(f"unknown format '{name}' for --to (known: {', '.join(FORMATS)})")
        out.append(FORMATS[name])
    if not out:
        raise KitError("--to needs a format, e.g. --to singularity,shifter")
    return out


COMPRESSORS = ("zstd", "lz4", "gzip", "xz")
DEFAULT_COMPRESSION = "zstd:3"  # fast to make, read by squashfuse and Linux >= 4.14


def parse_compression(spec: str) -> tuple[str, int | None]:
    """'zstd:3' -> ('zstd', 3); 'lz4' -> ('lz4', None); a KitError naming the choices."""
    name, _, level = spec.partition(":")
    if name not in COMPRESSORS or (level and not level.isdigit()) or (level and name == "lz4"):
        raise KitError(
            f"compression '{spec}' must be one of {', '.join(COMPRESSORS)}, optionally with "
            "a level (e.g. zstd:3, gzip:6; lz4 takes none)"
        )
    return name, int(level) if level else None


def compression() -> str:
    """The squashfs compression: KIT_SQUASHFS_COMPRESSION, else zstd at level 3."""
    spec = os.environ.get("KIT_SQUASHFS_COMPRESSION", DEFAULT_COMPRESSION)
    parse_compression(spec)
    return spec


def mksquashfs_args(spec: str) -> list[str]:
    """The same compression as mksquashfs options, for what Apptainer builds itself
    (`kit pull`, definition builds): its default, gzip on one pass, is several times
    slower to make than zstd:3. mksquashfs takes no level for xz or lz4."""
    name, level = parse_compression(spec)
    if level is not None and name not in ("gzip", "zstd"):
        raise KitError(f"mksquashfs takes no {name} level: set compression '{name}' alone")
    return ["-comp", name] + (["-Xcompression-level", str(level)] if level is not None else [])


def convert(recipe: Recipe, variant: str, formats: list[str]) -> Artifacts:
    """Make each requested format once per digest; print what was made or reused, with
    each phase's time (also kept in the manifest). The squashfs and the SIF share one
    export and one compression pass: the SIF wraps the same squashfs."""
    art = artifacts(recipe, variant)
    art.dir.mkdir(parents=True, exist_ok=True)
    tag = recipe.tag(variant)
    wanted = list(dict.fromkeys(FORMATS[f] for f in formats))
    if "shifter" in wanted:
        wanted.append("docker-archive")  # what CSCS-style `shifter load` takes
    steps = {
        "docker-archive": (art.tar, _save),
        "squashfs": (art.squashfs, _squashfs),
        "singularity": (art.sif, _sif),
    }
    needs = [f for f in ("squashfs", "singularity", "docker-archive") if _needed(f, wanted)]
    phases = {}
    with exclusive(art.dir / ".lock", f"the conversions of {tag} ({art.digest[:19]})"):
        for fmt in needs:
            target, make = steps[fmt]
            if target.exists():
                print(f"{fmt}: {target} (cached for {art.digest[:19]})", file=sys.stderr)
                continue
            t0 = time.monotonic()
            make(tag, art)
            phases[fmt] = round(time.monotonic() - t0, 1)
            print(f"{fmt}: {target} made in {phases[fmt]:.1f} s", file=sys.stderr)
        if phases:
            _record_phases(art, phases)
    return art


def _needed(fmt: str, wanted: list[str]) -> bool:
    if fmt == "squashfs":
        return bool({"shifter", "singularity", "squashfs"} & set(wanted))
    return fmt in wanted


def _record_phases(art: Artifacts, phases: dict[str, float]) -> None:
    """Conversion times and settings, in the manifest beside the products."""
    path = art.manifest
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        manifest = {}
    if not isinstance(manifest, dict):
        manifest = {}
    conv = manifest.setdefault("conversion", {})
    conv.setdefault("seconds", {}).update(phases)
    if art.meta.is_file():  # written with the squashfs (not there for a docker-archive alone)
        conv["squashfs_compression"] = json.loads(art.meta.read_text()).get("compression")
    write_atomically(path, json.dumps(manifest, indent=2) + "\n")


def _save(tag: str, art: Artifacts) -> None:
    tmp = art.tar.with_suffix(".tar.part")
    stream([engine.docker(), "save", "-o", str(tmp), tag], "docker save")
    tmp.rename(art.tar)


def _sif(tag: str, art: Artifacts) -> None:
    """A SIF around the squashfs already made (no second export or compression): one
    primary system partition, as `apptainer build` writes it."""
    apptainer = which("apptainer", APPTAINER_FIX)
    tmp = art.sif.with_suffix(".sif.part")
    tmp.unlink(missing_ok=True)
    capture([apptainer, "sif", "new", str(tmp)], "apptainer sif new")
    add = [apptainer, "sif", "add", "--datatype", "4", "--parttype", "2", "--partfs", "1"]
    add += ["--partarch", "2", "--groupid", "1", str(tmp), str(art.squashfs)]
    capture(add, "apptainer sif add")
    tmp.rename(art.sif)


def _squashfs(tag: str, art: Artifacts) -> None:
    """What Shifter's image gateway makes: the flattened root file system, all owned by
    root, plus the image's entrypoint, command, working directory and environment; with
    Apptainer's metadata folder added, so the same file is the SIF's partition."""
    tar2sqfs = which("tar2sqfs", "install squashfs-tools-ng (Debian package)")
    config = (engine.inspect(tag) or {}).get("Config") or {}
    spec = compression()
    name, level = parse_compression(spec)
    comp = ["-c", name] + (["-X", f"level={level}"] if level is not None else [])
    tmp = art.squashfs.with_suffix(".sqfs.part")
    tmp.unlink(missing_ok=True)
    apptainer = shutil.which("apptainer")  # without it (a Shifter-only site): no SIF files
    with tempfile.TemporaryDirectory(dir=art.dir) as scratch:
        skeleton = rootfs.apptainer_skeleton(apptainer, Path(scratch)) if apptainer else None
    with engine.created(tag, "export") as container:
        export = subprocess.Popen([engine.docker(), "export", container], stdout=subprocess.PIPE)
        pack = subprocess.Popen(
            [
                tar2sqfs,
                "--quiet",
                "--force",
                "--no-xattr",
                *comp,
                "-j",
                str(os.cpu_count() or 1),
                str(tmp),
            ],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            rootfs.flatten(export.stdout, pack.stdin, rootfs.apptainer_files(config, skeleton))
        except (OSError, tarfile.TarError) as e:
            raise KitError(f"flattening {tag} failed: {e}") from None
        finally:
            pack.stdin.close()
            export.stdout.close()
        err = pack.stderr.read().decode(errors="replace")
        if export.wait() != 0 or pack.wait() != 0:
            raise KitError(f"flattening {tag} failed: {err.strip()[-300:]}")
    meta = {
        "image": tag,
        "digest": art.digest,
        "entrypoint": config.get("Entrypoint"),
        "cmd": config.get("Cmd"),
        "workdir": config.get("WorkingDir") or "/",
        "env": config.get("Env") or [],
        "compression": spec,
    }
    write_atomically(art.meta, json.dumps(meta, indent=2) + "\n")
    tmp.rename(art.squashfs)
