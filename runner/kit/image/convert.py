"""`kit convert`: Docker image -> SIF, Shifter squashfs (+ metadata), docker-save tar.

Everything is filed under the image's content digest, so converting an
unchanged image again does no work and a rebuilt image never reuses a stale SIF.
"""

import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from kit.core import inputs, settings
from kit.core.errors import Failed, KitError
from kit.core.log import logger
from kit.core.paths import cache_dir, exclusive, made_whole, size_of, write_atomically
from kit.core.proc import capture, stream, which
from kit.image import engine, marks, rootfs
from kit.image.recipes import Recipe

log = logger(__name__)
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


class Image(Protocol):
    """What a conversion reads of an image: a kit recipe's, or a user's own (foreign.Foreign,
    which converts through this module and so is not imported by it)."""

    @property
    def name(self) -> str: ...  # its folder in the conversion cache

    @property
    def version(self) -> str: ...  # the recipe version its conversions are filed with

    def tag(self, variant: str) -> str: ...  # the engine's reference


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

    @property
    def products(self) -> dict[str, Path]:
        """Each format's file (FORMATS' values) in this folder."""
        return {"docker-archive": self.tar, "squashfs": self.squashfs, "singularity": self.sif}


def folder_of(name: str, digest: str) -> Path:
    """Where the conversions (and manifest) of image `name` with this digest are filed."""
    return cache_dir() / "images" / name / digest.split(":")[-1][:16]


def artifacts(recipe: Image, variant: str) -> Artifacts:
    digest = engine.image_id(recipe.tag(variant))
    return Artifacts(digest, folder_of(recipe.name, digest))


def earlier(recipe: Recipe, variant: str, fmt: str) -> Artifacts | None:
    """When no engine answers: the newest conversion of this recipe version and variant
    in the cache that holds `fmt` (a SIF serves Apptainer, a squashfs Charliecloud; none
    of them needs the engine to run), said on stderr. None when the engine answers."""
    if engine.answers():
        return None
    found = []
    for art in _builds(recipe, variant):
        made = art.products[FORMATS[fmt]]
        if made.is_file():
            found.append((made.stat().st_mtime, art, made))
    if not found:
        return None
    _, art, made = max(found, key=lambda x: x[0])
    marks.use(art.dir)
    if not made.is_file():  # removed (kit cache prune) before it was marked
        return None
    log.info(
        f"no Docker engine answers: using {made}, converted earlier from "
        f"{recipe.tag(variant)} ({art.digest[:19]})"
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
    spec = settings.value("KIT_SQUASHFS_COMPRESSION") or DEFAULT_COMPRESSION
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


def convert(recipe: Image, variant: str, formats: list[str]) -> Artifacts:
    """Make each requested format once per digest; print what was made or reused, with
    each phase's time (also kept in the manifest). The squashfs and the SIF share one
    export and one compression pass: the SIF wraps the same squashfs."""
    art = artifacts(recipe, variant)
    art.dir.mkdir(parents=True, exist_ok=True)
    marks.use(art.dir)  # for the rest of this kit's life: kit cache prune leaves it
    tag = recipe.tag(variant)
    wanted = list(dict.fromkeys(FORMATS[f] for f in formats))
    if "shifter" in wanted:
        wanted.append("docker-archive")  # what CSCS-style `shifter load` takes
    makers = {"docker-archive": _save, "squashfs": _squashfs, "singularity": _sif}
    needs = [f for f in ("squashfs", "singularity", "docker-archive") if _needed(f, wanted)]
    phases = {}
    with exclusive(art.dir / ".lock", f"the conversions of {tag} ({art.digest[:19]})"):
        for k, fmt in enumerate(needs, 1):
            target, make = art.products[fmt], makers[fmt]
            if target.exists():
                log.info(f"{fmt}: {target} (cached for {art.digest[:19]})")
                continue
            _room(art, fmt, tag)
            log.info(f"{fmt} ({k}/{len(needs)}): {DOING[fmt]} ...")  # the long part starts
            t0 = time.monotonic()
            make(tag, art)
            phases[fmt] = round(time.monotonic() - t0, 1)
            log.info(f"{fmt}: {target} made in {phases[fmt]:.1f} s")
        if phases:
            record_made(recipe, variant, art, phases)
    return art


DOING = {  # what each phase does, said as it starts: the squashfs takes minutes
    "squashfs": "docker export of the image, flattened into one compressed squashfs",
    "singularity": "the squashfs wrapped as a SIF (no second compression)",
    "docker-archive": "docker save of the image",
}

# kit's images compress to 0.25-0.32 of their size at zstd:3: a fifth is a floor
SQUASHFS_SHARE = 5


def _room(art: Artifacts, fmt: str, tag: str) -> None:
    """Refuse to start a format the cache's disk cannot take: one line now, rather than a
    tool's "no space left" minutes later. The archive takes the image's size and the SIF
    its squashfs's; for the squashfs only a floor is known, a fifth of the image's size,
    so the check refuses what cannot fit and lets the rest try."""
    if fmt == "singularity":
        need = art.squashfs.stat().st_size
    else:
        size = int((engine.inspect(tag) or {}).get("Size") or 0)
        need = size if fmt == "docker-archive" else size // SQUASHFS_SHARE
    free = shutil.disk_usage(art.dir).free
    if free < need:
        raise KitError(
            f"the {fmt} of {tag} needs about {need / 1e9:.2f} GB and {art.dir} has "
            f"{free / 1e9:.2f} GB free; make room there, or set KIT_CACHE to a larger disk"
        )


def _builds(recipe: Image, variant: str) -> list[Artifacts]:
    """The cache's folders of every build of this recipe version and variant (by manifest)."""
    out = []
    for manifest in (cache_dir() / "images" / recipe.name).glob(f"*/{MANIFEST}"):
        m = inputs.remade(manifest)
        if not isinstance(m, dict) or not isinstance(m.get("digest"), str):
            continue
        if (m.get("recipe_version"), m.get("variant")) == (recipe.version, variant):
            out.append(Artifacts(m["digest"], manifest.parent))
    return out


def drop_superseded(recipe: Image, variant: str, art: Artifacts, made: list[str]) -> None:
    """Clear the conversions of earlier builds of the same recipe version and variant (a
    rebuild leaves them unreachable but for `earlier`, which takes the newest), so each
    rebuild does not leave gigabytes in the cache: the folder of a build whose image the
    engine no longer holds goes whole; of one it still holds (or when no engine answers),
    what was just made here goes, the rest staying for `earlier`, and the folder too when
    no product is left. A folder a kit uses (a campaign, a conversion) is left alone."""
    older = [old for old in _builds(recipe, variant) if old.dir != art.dir]
    held = engine.image_ids() if older else None
    for old in older:
        if held is not None and old.digest not in held:
            freed = size_of(old.dir)
            if marks.remove(old.dir):
                log.info(
                    f"removed {freed / 1e9:.2f} GB in {old.dir}: the conversions of "
                    f"{old.digest[:19]}, an earlier build of {recipe.tag(variant)} that the "
                    "engine no longer holds"
                )
            continue
        freed, left = 0, True
        with marks.unused(old.dir) as free:
            if free:
                for fmt in made:
                    if (path := old.products[fmt]).is_file():
                        freed += path.stat().st_size
                        path.unlink()
                left = any(p.exists() for p in old.products.values())
        if not left:
            marks.remove(old.dir)
        if freed:
            log.info(f"removed {freed / 1e9:.2f} GB of the superseded conversions in {old.dir}")


def _needed(fmt: str, wanted: list[str]) -> bool:
    if fmt == "squashfs":
        return bool({"shifter", "singularity", "squashfs"} & set(wanted))
    return fmt in wanted


def record_made(recipe: Image, variant: str, art: Artifacts, phases: dict[str, float]) -> None:
    """File what was just made: its times and settings in the manifest beside it, with
    the image's identity (what a foreign image's manifest gets only here), then drop the
    same formats from earlier builds of the image, which this one supersedes."""
    path = art.manifest
    manifest = inputs.remade(path)
    if not isinstance(manifest, dict):
        manifest = {}
    manifest.setdefault("digest", art.digest)
    manifest.setdefault("tag", recipe.tag(variant))
    manifest.setdefault("recipe_version", recipe.version)
    manifest.setdefault("variant", variant)
    conv = manifest.setdefault("conversion", {})
    conv.setdefault("seconds", {}).update(phases)
    if art.meta.is_file():  # written with the squashfs (not there for a docker-archive alone)
        meta = inputs.remade(art.meta)
        conv["squashfs_compression"] = meta.get("compression") if isinstance(meta, dict) else None
    write_atomically(path, json.dumps(manifest, indent=2) + "\n")
    drop_superseded(recipe, variant, art, list(phases))


def _save(tag: str, art: Artifacts) -> None:
    with made_whole(art.tar) as tmp:
        stream([engine.docker(), "save", "-o", str(tmp), tag], "docker save")


def _sif(tag: str, art: Artifacts) -> None:
    wrap_sif(art.squashfs, art.sif)


def wrap_sif(squashfs: Path, target: Path) -> None:
    """A SIF around a squashfs already made (no second export or compression): one
    primary system partition, as `apptainer build` writes it."""
    apptainer = which("apptainer", APPTAINER_FIX)
    with made_whole(target) as tmp:
        capture([apptainer, "sif", "new", str(tmp)], "apptainer sif new")
        add = [apptainer, "sif", "add", "--datatype", "4", "--parttype", "2", "--partfs", "1"]
        add += ["--partarch", "2", "--groupid", "1", str(tmp), str(squashfs)]
        capture(add, "apptainer sif add")


def packer(epoch: int) -> list[str]:
    """The squashfs writer of a tar stream on its stdin (the file to write follows): kit's
    compression setting, every date `epoch`, on every core."""
    tar2sqfs = which("tar2sqfs", "install squashfs-tools-ng (Debian package)")
    name, level = parse_compression(compression())
    comp = ["-c", name] + (["-X", f"level={level}"] if level is not None else [])
    pack = [tar2sqfs, "--quiet", "--force", "--no-xattr", "--defaults", f"mtime={epoch}", *comp]
    return [*pack, "-j", str(os.cpu_count() or 1)]


def _squashfs(tag: str, art: Artifacts) -> None:
    """What Shifter's image gateway makes: the flattened root file system, all owned by
    root, plus the image's entrypoint, command, working directory and environment; with
    Apptainer's metadata folder added, so the same file is the SIF's partition."""
    config = (engine.inspect(tag) or {}).get("Config") or {}
    apptainer = shutil.which("apptainer")  # without it (a Shifter-only site): no SIF files
    with tempfile.TemporaryDirectory(dir=art.dir) as scratch:
        skeleton = rootfs.apptainer_skeleton(apptainer, Path(scratch)) if apptainer else None
    epoch = created(tag)
    pack = packer(epoch)
    meta = {
        "image": tag,
        "digest": art.digest,
        "entrypoint": config.get("Entrypoint"),
        "cmd": config.get("Cmd"),
        "workdir": config.get("WorkingDir") or "/",
        "env": config.get("Env") or [],
        "compression": compression(),
    }
    with made_whole(art.squashfs) as tmp:
        _flatten(tag, [*pack, str(tmp)], rootfs.apptainer_files(config, skeleton), epoch)
        write_atomically(art.meta, json.dumps(meta, indent=2) + "\n")  # before the squashfs


def created(tag: str) -> int:
    """When the image says it was made, in seconds (a kit image: its recipe's epoch): the
    latest date its flattened file system and squashfs carry."""
    text = str((engine.inspect(tag) or {}).get("Created") or "1970-01-01T00:00:00Z")
    try:
        when = datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", text).replace("Z", "+00:00"))
    except ValueError:
        return 0
    return max(0, int(when.timestamp()))


def _flatten(tag: str, pack: list[str], extra: rootfs.Extra, epoch: int) -> None:
    """`docker export` of a container of `tag`, flattened into the squashfs writer `pack`."""
    with engine.created(tag, "export") as container:
        flatten_into([engine.docker(), "export", container], pack, extra, epoch, tag)


def flatten_into(
    source: list[str], pack: list[str], extra: rootfs.Extra, epoch: int, what: str
) -> None:
    """The tar stream the command `source` writes, flattened (rootfs.flatten) into the
    squashfs writer `pack`."""
    export = subprocess.Popen(source, stdout=subprocess.PIPE)
    packer = subprocess.Popen(pack, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        rootfs.flatten(export.stdout, packer.stdin, extra, epoch)
    except (OSError, tarfile.TarError) as e:
        raise Failed(f"flattening {what} failed: {e}") from None
    finally:
        packer.stdin.close()
        export.stdout.close()
    err = packer.stderr.read().decode(errors="replace")
    if export.wait() != 0 or packer.wait() != 0:
        raise Failed(f"flattening {what} failed: {err.strip()[-300:]}")
