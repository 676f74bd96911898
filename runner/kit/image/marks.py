"""Marks on a folder of the conversion cache: which kits use it now, and when it was last used.

A kit that uses a folder's products (a campaign, a conversion) holds a shared flock on
its IN_USE file for the rest of its life: the kernel drops it when the process ends,
however it ends (a kill -9 too), so no stale mark outlives a campaign. Removing a
folder takes the exclusive flock without waiting, so it removes only what no kit holds.
The LAST_USED stamp's mtime says when a kit last used it (atime is often not kept).
"""

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from kit.core.paths import flock

IN_USE = ".in-use"
LAST_USED = ".last-used"
REMOVING = ".removing-"  # a folder being removed (one left by a removal that was killed)

_held: dict[Path, int] = {}  # folder -> the descriptor holding its shared flock


def use(folder: Path) -> None:
    """Mark folder used by this process until it ends, and stamp it used now. A folder
    being removed meanwhile (its mark taken away with it) is made anew and marked; a
    cache this user cannot write is used unmarked, as it cannot be pruned by them either."""
    try:
        if folder not in _held:
            _held[folder] = _shared(folder)
        (folder / LAST_USED).touch()
    except OSError:
        return


def _shared(folder: Path) -> int:
    """A descriptor holding a shared flock on folder's IN_USE file, the one now at its path."""
    while True:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / IN_USE, os.O_RDONLY | os.O_CREAT, 0o644)
        flock(fd, shared=True, wait=True)  # waits only while a removal holds it
        with contextlib.suppress(FileNotFoundError):
            if os.stat(folder / IN_USE).st_ino == os.fstat(fd).st_ino:
                return fd
        os.close(fd)  # the folder was removed while this waited: make it anew


def in_use(folder: Path) -> bool:
    """Whether some kit holds folder's mark now (looked at without writing anything)."""
    try:
        fd = os.open(folder / IN_USE, os.O_RDONLY)
    except OSError:
        return False
    try:
        return not flock(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def unused(folder: Path) -> Iterator[bool]:
    """Whether no kit uses folder; while it is so, none can start to (its mark is held
    exclusively for the block)."""
    fd = os.open(folder / IN_USE, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        yield flock(fd)
    finally:
        os.close(fd)


def remove(folder: Path) -> bool:
    """Remove folder unless a kit uses it; False when one does. It is renamed away under
    its mark first, so a kit that starts to use it meanwhile makes a new folder instead
    of writing into one being deleted."""
    with unused(folder) as free:
        if not free:
            return False
        gone = folder.with_name(f"{REMOVING}{folder.name}-{os.getpid()}")
        folder.rename(gone)
    shutil.rmtree(gone, ignore_errors=True)
    return True


def leftovers(root: Path) -> list[Path]:
    """Folders under root's image folders whose removal was cut short (kill, power loss)."""
    return sorted(root.glob(f"*/{REMOVING}*"))
