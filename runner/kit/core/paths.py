"""Where kit finds its recipes and keeps generated artefacts."""

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path


def repo_root() -> Path:
    """The checkout holding recipes/, containers/ and benchmarks/ (KIT_ROOT overrides)."""
    if "KIT_ROOT" in os.environ:
        return Path(os.environ["KIT_ROOT"])
    return Path(__file__).resolve().parents[3]  # runner/kit/core/paths.py


def cache_dir() -> Path:
    """Converted images and native environments, keyed by digest (KIT_CACHE overrides)."""
    if "KIT_CACHE" in os.environ:
        return Path(os.environ["KIT_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kit"


@contextlib.contextmanager
def exclusive(lock: Path, what: str) -> Iterator[None]:
    """Hold an exclusive lock on the file `lock` while kit makes `what` in the cache: a
    second kit (another campaign on the same login node, an array job's next task) waits
    for the first, then finds the result made, instead of writing the same files at once.
    flock: local disks, and NFS homes through the kernel's NFS locking."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another kit making {what} ({lock})", file=sys.stderr, flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def made_whole(path: Path) -> Iterator[Path]:
    """A file made by a tool in one go (a SIF, a squashfs, a docker save archive): the
    tool writes `<path>.part`, renamed to `path` when the block ends normally and removed
    when it fails or is interrupted, so a full disk or a Ctrl-C leaves neither a file that
    looks finished nor gigabytes of a half-made one."""
    part = path.with_name(path.name + ".part")
    part.unlink(missing_ok=True)
    try:
        yield part
        part.rename(path)
    finally:
        part.unlink(missing_ok=True)


def write_atomically(path: Path, text: str) -> None:
    """Write `path` whole or not at all: into a temporary file beside it, flushed to disk,
    then renamed over it. A reader (or a run killed mid-write) never sees half a file,
    and a symlink at `path` is replaced, never written through."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
