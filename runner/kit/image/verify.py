"""`kit verify`: is an image what its recipe version makes?

The image is built again from its recipe with no cache, under a scratch tag, and the two
digests compared: the same digest is the same image, bit for bit. Otherwise the two file
trees are compared (each image's layers applied in order, whiteouts honoured) and every
path that differs is named with how: present in one only, content, mode, owner, mtime;
and every config field that differs. A SIF is compared with the one kit makes from the
same recipe version, less the bytes the SIF format fills with a new ID and the time at
every write (kit.image.sif).
"""

import hashlib
import json
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from kit.core import inputs
from kit.core.errors import KitError
from kit.core.paths import write_atomically
from kit.core.proc import capture, which
from kit.image import convert, engine, reproducible, sif
from kit.image.convert import APPTAINER_FIX

KINDS = ("only in the image", "only in the rebuild", "content", "mode", "owner", "mtime")
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass(frozen=True)
class Entry:
    """What a path is in an image's file tree, as a comparison reads it."""

    kind: str  # file, dir, link, hardlink, char, block, fifo
    content: str  # a file's SHA-256, a link's target, a device's numbers
    mode: int
    owner: tuple[int, int]
    mtime: int


def _kind(m: tarfile.TarInfo) -> str:
    kinds = {
        tarfile.DIRTYPE: "dir",
        tarfile.SYMTYPE: "link",
        tarfile.LNKTYPE: "hardlink",
        tarfile.CHRTYPE: "char",
        tarfile.BLKTYPE: "block",
        tarfile.FIFOTYPE: "fifo",
    }
    return kinds.get(m.type, "file")


@dataclass
class Layer:
    """One layer's entries and what it removes from the layers below."""

    entries: dict[str, Entry] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)  # whiteouts: a path and all below it
    opaque: list[str] = field(default_factory=list)  # folders whose lower content is gone


def read_layer(layer: IO[bytes], _index: int = 0) -> Layer:
    out = Layer()
    with tarfile.open(fileobj=layer, mode="r|") as tar:
        for m in tar:
            path = m.name.removeprefix("./").rstrip("/")
            folder, _, name = path.rpartition("/")
            if name == OPAQUE:
                out.opaque.append(folder)
                continue
            if name.startswith(WHITEOUT):
                out.removed.append(f"{folder}/{name[len(WHITEOUT) :]}".lstrip("/"))
                continue
            if m.isreg():
                data = tar.extractfile(m)
                assert data is not None
                sha = hashlib.sha256()
                while chunk := data.read(1 << 20):
                    sha.update(chunk)
                content = sha.hexdigest()
            elif m.issym() or m.islnk():
                content = m.linkname
            else:
                content = f"{m.devmajor},{m.devminor}" if m.ischr() or m.isblk() else ""
            # the permission bits alone: Go's tar writer (the engine's) puts the file type's
            # bits in the mode too (0o40755), Python's (kit's reproducible layers) does not
            perms = m.mode & 0o7777
            out.entries[path] = Entry(_kind(m), content, perms, (m.uid, m.gid), int(m.mtime))
    return out


def _below(tree: dict[str, Entry], path: str) -> list[str]:
    return [p for p in tree if p.startswith(path + "/")] if path else list(tree)


def flatten(layers: list[Layer]) -> dict[str, Entry]:
    """The file tree the layers make, applied in order (as overlayfs shows it)."""
    tree: dict[str, Entry] = {}
    for layer in layers:
        for folder in layer.opaque:
            for p in _below(tree, folder):
                del tree[p]
        for path in layer.removed:
            for p in [path, *_below(tree, path)]:
                tree.pop(p, None)
        tree.update(layer.entries)
    return tree


def image_tree(ref: str) -> tuple[dict, dict[str, Entry]]:
    """An engine image's config and file tree."""
    with reproducible.saved(ref) as stream:
        config, layers = reproducible.read_saved(stream, read_layer)
    return config, flatten(layers)


def differences(a: dict[str, Entry], b: dict[str, Entry]) -> dict[str, list[str]]:
    """Each kind of difference (KINDS) with the paths that show it, sorted; a path whose
    content differs is not also listed under its mtime."""
    out: dict[str, list[str]] = {k: [] for k in KINDS}
    for path in sorted(a.keys() | b.keys()):
        x, y = a.get(path), b.get(path)
        if x is None or y is None:
            out["only in the rebuild" if x is None else "only in the image"].append(path)
            continue
        if (x.kind, x.content) != (y.kind, y.content):
            out["content"].append(path)
        if x.mode != y.mode:
            out["mode"].append(path)
        if x.owner != y.owner:
            out["owner"].append(path)
        if x.mtime != y.mtime and (x.kind, x.content) == (y.kind, y.content):
            out["mtime"].append(path)
    return {k: v for k, v in out.items() if v}


def config_differences(a: dict, b: dict) -> list[str]:
    """The config fields (run settings, history, layers) that differ, by name."""
    fields = sorted(set(a) | set(b))
    names = []
    for f in fields:
        if f == "config":
            run_a, run_b = a.get(f) or {}, b.get(f) or {}
            keys = sorted(set(run_a) | set(run_b))
            names += [f"config.{k}" for k in keys if run_a.get(k) != run_b.get(k)]
        elif a.get(f) != b.get(f):
            names.append(f)
    return names


@dataclass(frozen=True)
class Verdict:
    image: str
    digest: str
    against: str  # what it was compared with: the rebuild's tag, or a reference
    other: str  # that one's digest
    files: dict[str, list[str]]
    config: list[str]

    @property
    def reproduced(self) -> bool:
        return self.digest == self.other

    def as_json(self) -> dict:
        return {
            "image": self.image,
            "digest": self.digest,
            "against": self.against,
            "against_digest": self.other,
            "reproduced": self.reproduced,
            "differences": {k: v for k, v in self.files.items()},
            "config_differences": self.config,
        }


def compare(image: str, other: str) -> Verdict:
    """Two engine images compared: by digest, and when they differ, file by file."""
    a, b = engine.image_id(image), engine.image_id(other)
    if a == b:
        return Verdict(image, a, other, b, {}, [])
    config_a, tree_a = image_tree(a)
    config_b, tree_b = image_tree(b)
    return Verdict(
        image, a, other, b, differences(tree_a, tree_b), config_differences(config_a, config_b)
    )


def lines(v: Verdict, limit: int | None = 20) -> Iterator[str]:
    """The verdict as a person reads it: each kind of difference with its paths (the
    first `limit` of each, or all)."""
    if v.reproduced:
        yield f"reproduced: {v.image} and {v.against} are both {v.digest}"
        return
    yield f"NOT reproduced: {v.image} is {v.digest[:19]}, {v.against} is {v.other[:19]}"
    if not v.files and not v.config:
        yield "  the file trees and config fields are the same; the layers are split otherwise"
    for kind, paths in v.files.items():
        yield f"  {kind}: {len(paths)} path(s)"
        shown = paths if limit is None else paths[:limit]
        yield from (f"    /{p}" for p in shown)
        if len(shown) < len(paths):
            yield f"    ... and {len(paths) - len(shown)} more (--all lists every one)"
    if v.config:
        yield f"  config fields: {', '.join(v.config)}"


def record(manifest_path: Path, v: Verdict, how: str, lock: str | None) -> None:
    """File the verdict in the image's manifest (kit.image.convert), with the SHA-256 of
    the lock file the recipe had then (None: no lock), for each trial's record."""
    manifest = inputs.remade(manifest_path)
    if not isinstance(manifest, dict):
        manifest = {}
    manifest["verified"] = {
        "at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "against": how,
        "reproduced": v.reproduced,
        "digest": v.other,
        "lock": lock,
    }
    manifest_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(manifest_path, json.dumps(manifest, indent=2) + "\n")


def filed(name: str, digest: str | None) -> dict | None:
    """The verdict kit verify filed for the image of this digest, if any: the trial
    record carries it, so the report can say whether the image measured was verified."""
    if not digest or not digest.startswith("sha256:"):
        return None
    manifest = inputs.remade(convert.folder_of(name, digest) / convert.MANIFEST)
    if not isinstance(manifest, dict) or manifest.get("digest") != digest:
        return None
    held = manifest.get("verified")
    return held if isinstance(held, dict) else None


def sif_labels(path: Path) -> dict[str, str]:
    """The labels a SIF carries (kit's: its recipe, version and variant)."""
    apptainer = which("apptainer", APPTAINER_FIX)
    out = capture([apptainer, "inspect", "--labels", "--json", str(path)], "apptainer inspect")
    try:
        labels = json.loads(out)["data"]["attributes"]["labels"]
    except (ValueError, KeyError, TypeError):
        labels = None
    if not isinstance(labels, dict):
        raise KitError(f"'{path}': apptainer inspect gave no labels; give a SIF kit made")
    return {str(k): str(v) for k, v in labels.items()}


def sif_tree(path: Path, scratch: Path) -> dict[str, Entry]:
    """The file tree in a SIF's squashfs partition (sqfs2tar, squashfs-tools-ng)."""
    apptainer = which("apptainer", APPTAINER_FIX)
    sqfs2tar = which("sqfs2tar", "install squashfs-tools-ng (Debian package)")
    part = scratch / f"{path.stem}.sqfs"
    with part.open("wb") as out:
        dumped = subprocess.run(
            [apptainer, "sif", "dump", "1", str(path)], stdout=out, stderr=subprocess.PIPE
        )
    if dumped.returncode != 0:
        said = (dumped.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise KitError(f"'{path}': apptainer sif dump could not read its partition ({said})")
    with subprocess.Popen([sqfs2tar, "--no-xattr", str(part)], stdout=subprocess.PIPE) as p:
        assert p.stdout is not None
        try:
            layer = read_layer(p.stdout)
        except tarfile.TarError as e:
            raise KitError(f"'{path}': its squashfs partition could not be read ({e})") from None
    return flatten([layer])


def compare_sif(given: Path, made: Path, image: str) -> Verdict:
    """A SIF against the one kit made from its recipe version: by their bytes less the
    fields no SIF writer fixes (kit.image.sif), and when they differ, file by file."""
    a, b = sif.digest(given), sif.digest(made)
    if a == b:
        return Verdict(str(given), a, f"{made} ({image})", b, {}, [])
    with tempfile.TemporaryDirectory(dir=made.parent) as scratch:
        files = differences(sif_tree(given, Path(scratch)), sif_tree(made, Path(scratch)))
    return Verdict(str(given), a, f"{made} ({image})", b, files, [])
