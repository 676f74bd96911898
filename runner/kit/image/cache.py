"""`kit cache ls` and `kit cache prune`: the conversion cache's image folders, and removing
the least recently used of them until the rules given hold.

Each image digest has a folder (images/NAME/DIGEST; an image kit did not build, under
images/foreign-HASH/DIGEST) holding its SIF, squashfs and docker save archive, gigabytes
each, kept until removed: a test machine's cache once filled its disk mid-campaign. A
folder a running kit uses (its mark held, kit.image.marks) is never removed.
"""

import json
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from kit.core import columns, inputs, schema, units
from kit.core.errors import KitError
from kit.core.paths import cache_dir, size_of
from kit.image import convert, marks

PRODUCTS = {"singularity": "sif", "squashfs": "squashfs", "docker-archive": "tar"}  # by format
META = "image.meta.json"  # beside a squashfs: the image it was made from


@dataclass(frozen=True)
class Folder:
    """One image digest's folder, as `kit cache ls` shows it."""

    path: Path
    image: str  # the tag it was built or converted as (a foreign image: as given)
    digest: str
    products: dict[str, int]  # sif, squashfs, tar, GPU copies: bytes each
    size: int  # every file in it: products and their metadata
    last_used: float  # when a kit last used it (seconds since the epoch)
    in_use: bool  # a running kit (a campaign, a conversion) uses it now
    in_engine: bool | None  # the engine still holds the image (None: no engine answers)

    def used(self, now: float) -> float:
        """When it was last used, as pruning orders folders: one in use is used now."""
        return now if self.in_use else self.last_used

    def as_json(self) -> dict:
        return {
            "path": str(self.path),
            "image": self.image,
            "digest": self.digest,
            "products": self.products,
            "size_bytes": self.size,
            "last_used": _when(self.last_used, "%Y-%m-%dT%H:%M:%SZ", UTC),
            "in_use": self.in_use,
            "in_engine": self.in_engine,
        }


def images_dir() -> Path:
    return cache_dir() / "images"


def folders(engine_ids: set[str] | None, now: float) -> list[Folder]:
    """Every image folder in the cache, least recently used first, as pruning takes them
    (engine_ids: engine.image_ids's answer)."""
    for where in (cache_dir(), images_dir()):  # a file there listed "0 image folders"
        if where.exists() and not where.is_dir():
            raise KitError(
                f"the cache's folder {where} is a file, not a folder; move it away, or set "
                "KIT_CACHE to a folder"
            )
    found = []
    for path in images_dir().glob("*/*"):
        # a link is no folder kit made: pruning it marked the folder it points to, outside
        # the cache, and left the link (renamed, as rmtree refuses one) for ever
        if path.is_dir() and not path.is_symlink() and not path.name.startswith("."):
            try:
                found.append(_folder(path, engine_ids))
            except FileNotFoundError:  # removed meanwhile (another kit cache prune)
                continue
    return sorted(found, key=lambda f: (f.used(now), str(f.path)))


def _folder(path: Path, engine_ids: set[str] | None) -> Folder:
    manifest = _json(path / convert.MANIFEST)
    digest = manifest.get("digest")
    digest = digest if isinstance(digest, str) else path.name
    image = manifest.get("tag") or _json(path / META).get("image") or path.parent.name
    art = convert.Artifacts(digest, path)
    products = {
        label: art.products[fmt].stat().st_size
        for fmt, label in PRODUCTS.items()
        if art.products[fmt].is_file()
    }
    for sub in sorted(path.iterdir()):  # copies made from a product (a GPU image's folder)
        if sub.is_dir() and not sub.is_symlink() and (n := size_of(sub)):
            products[sub.name] = n
    return Folder(
        path,
        schema.printable(str(image)),  # a tag as a metadata file says it: shown on one line
        schema.printable(digest),
        products,
        size_of(path),
        _last_used(path),
        marks.in_use(path),
        None if engine_ids is None else digest in engine_ids,
    )


def _json(path: Path) -> dict:
    """A metadata file's object, or {} when it is missing or unreadable."""
    got = inputs.remade(path)
    return got if isinstance(got, dict) else {}


def _last_used(path: Path) -> float:
    """Its stamp's time; a folder from before stamps: when anything in it last changed."""
    stamp = path / marks.LAST_USED
    if stamp.is_file():
        return stamp.stat().st_mtime
    return max([path.stat().st_mtime, *(p.lstat().st_mtime for p in path.iterdir())])


def _when(t: float, fmt: str = "%Y-%m-%d %H:%M", tz: tzinfo | None = None) -> str:
    return datetime.fromtimestamp(t, tz).strftime(fmt)


def listing(engine_ids: set[str] | None) -> str:
    """`kit cache ls`: a line a folder, least recently used first (what prune removes
    first), then the total."""
    found = folders(engine_ids, time.time())
    engine = {True: "yes", False: "gone", None: "?"}
    rows = [("LAST USED", "SIZE", "IN USE", "ENGINE", "DIGEST", "IMAGE", "PRODUCTS")]
    for f in found:
        made = ", ".join(f"{k} {units.size_text(n)}" for k, n in f.products.items()) or "-"
        used = "yes" if f.in_use else "-"
        size = units.size_text(f.size)
        rows.append(
            (_when(f.last_used), size, used, engine[f.in_engine], f.digest[:19], f.image, made)
        )
    lines = columns.aligned(rows, right={1})
    total = units.size_text(sum(f.size for f in found))
    lines.append(f"{len(found)} image folders, {total}, in {images_dir()}")
    if engine_ids is None:
        lines.append("ENGINE ?: no Docker engine answers, so which images it holds is not known")
    return "\n".join(lines)


def listing_json(engine_ids: set[str] | None) -> str:
    """`kit cache ls --json`: the same, as data."""
    found = folders(engine_ids, time.time())
    return json.dumps(
        {
            "root": str(images_dir()),
            "size_bytes": sum(f.size for f in found),
            "engine_answers": engine_ids is not None,
            "folders": [f.as_json() for f in found],
        },
        indent=2,
    )


@dataclass(frozen=True)
class Rules:
    """What `kit cache prune` makes hold: at most keep_last folders, none unused for more
    than older_than seconds, at most max_size bytes in all."""

    keep_last: int | None = None
    older_than: float | None = None
    max_size: int | None = None

    @classmethod
    def of(cls, keep_last: int | None, older_than: str | None, max_size: str | None) -> "Rules":
        """The rules as typed, each checked (a KitError naming the value and the fix)."""
        if keep_last is None and older_than is None and max_size is None:
            raise KitError(
                "kit cache prune needs a rule: --keep-last N, --older-than AGE (e.g. 30d) "
                "or --max-size SIZE (e.g. 20G)"
            )
        if keep_last is not None and keep_last < 0:
            raise KitError(f"--keep-last {keep_last} must be 0 or more folders")
        return cls(
            keep_last,
            None if older_than is None else units.duration("--older-than", older_than),
            None if max_size is None else units.size("--max-size", max_size),
        )

    def broken(self, f: Folder, left: list[Folder], now: float) -> bool:
        """Whether f must go for the rules to hold (left: the folders still there)."""
        return (
            (self.keep_last is not None and len(left) > self.keep_last)
            or (self.older_than is not None and now - f.used(now) > self.older_than)
            or (self.max_size is not None and sum(x.size for x in left) > self.max_size)
        )


@dataclass(frozen=True)
class Pruned:
    """What `kit cache prune` did (or with dry_run would do): each folder the rules judged,
    in order, those of them kept because a running kit uses them, the bytes freed, and
    what is left."""

    dry_run: bool
    judged: list[Folder]
    kept: list[Folder]
    freed: int
    left: list[Folder]

    @property
    def removed(self) -> list[Folder]:
        return [f for f in self.judged if f not in self.kept]

    def as_json(self) -> dict:
        return {
            "dry_run": self.dry_run,
            "removed": [f.as_json() for f in self.removed],
            "kept": [f.as_json() for f in self.kept],
            "freed_bytes": self.freed,
            "left_bytes": sum(f.size for f in self.left),
            "left_folders": len(self.left),
        }


def pruned(rules: Rules, dry_run: bool, now: float | None = None) -> Pruned:
    """Remove whole folders, least recently used first, until the rules hold; one in use
    is kept. What was removed, or with dry_run would be, and the space freed."""
    now = time.time() if now is None else now
    left = folders(None, now)
    judged, kept, freed = [], [], 0
    for f in list(left):
        if not rules.broken(f, left, now):
            continue
        judged.append(f)
        if f.in_use or not (dry_run or marks.remove(f.path)):
            kept.append(f)
            continue
        left.remove(f)
        freed += f.size
    if not dry_run:
        for gone in marks.leftovers(images_dir()):  # removals cut short (kill, power loss)
            freed += size_of(gone)
            shutil.rmtree(gone, ignore_errors=True)
    return Pruned(dry_run, judged, kept, freed, left)


def prune(rules: Rules, dry_run: bool, now: float | None = None) -> str:
    """pruned(), said a line a folder in the order it was judged (kit cache prune)."""
    p = pruned(rules, dry_run, now)
    verb = "would remove" if dry_run else "removed"
    lines = [
        f"kept {f.path}: in use by a running kit ({units.size_text(f.size)})"
        if f in p.kept
        else f"{verb} {f.path}: {f.image} {f.digest[:19]}, {units.size_text(f.size)}, "
        f"last used {_when(f.last_used)}"
        for f in p.judged
    ]
    held = units.size_text(sum(f.size for f in p.left))
    lines.append(
        f"{'would free' if dry_run else 'freed'} {units.size_text(p.freed)}; the cache's images "
        f"{'would ' if dry_run else ''}hold {held} in {len(p.left)} folders"
    )
    return "\n".join(lines)
