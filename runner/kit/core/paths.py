"""Where kit finds its recipes and keeps generated artefacts."""

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from kit.core import settings
from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.proc import capture

log = logger(__name__)


def repo_root() -> Path:
    """The checkout holding recipes/, containers/ and benchmarks/ (KIT_ROOT overrides)."""
    if root := settings.value("KIT_ROOT"):
        return Path(root)
    return Path(__file__).resolve().parents[3]  # runner/kit/core/paths.py


def cache_dir() -> Path:
    """Converted images and native environments, keyed by digest (KIT_CACHE overrides)."""
    if cache := settings.value("KIT_CACHE"):
        return Path(cache)
    xdg = settings.value("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kit"


def flock(fd: int, shared: bool = False, wait: bool = False) -> bool:
    """kit's one way to take a flock on an open file: shared or exclusive, waiting for it
    or not; whether it was taken (False: another process holds it, and this did not wait).
    The kernel drops it when the descriptor closes or the process ends, however it ends."""
    kind = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        fcntl.flock(fd, kind if wait else kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextlib.contextmanager
def exclusive(lock: Path, what: str, wait: float | None = None) -> Iterator[None]:
    """Hold an exclusive lock on the file `lock` while kit makes `what` (in the cache, the
    catalogue): a second kit (another campaign on the same login node, an array job's next
    task) waits for the first, then finds the result made, instead of writing the same
    files at once. With `wait`, a KitError after that many seconds instead of waiting on.
    A lock file another user made (a site's shared folder) is held through a read-only
    descriptor: flock needs no write. flock: local disks, and NFS homes through the
    kernel's NFS locking."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    except PermissionError:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        waited = 0.0
        while not flock(fd):
            if wait is None:
                log.info(f"waiting for another kit making {what} ({lock})")
                flock(fd, wait=True)
                break
            if waited >= wait:
                raise KitError(f"{what} stayed locked by another kit for {waited:.0f} s; try again")
            time.sleep(0.1)
            waited += 0.1
        yield
    finally:
        os.close(fd)


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


def make_dir(folder: Path, what: str, dry_run: bool = False) -> None:
    """Make folder and its parents (a folder the user named: what is its option), or with
    dry_run only find what would stop that, without making anything; either way the same
    one-line KitError, so a dry run refuses what the run would."""
    if os.path.exists(folder) and not os.path.isdir(folder):  # os.path's: False if unsearchable
        raise KitError(f"{what} '{folder}' is a file; choose a directory")
    why = None
    if dry_run:
        why = _unmakeable(folder)
    else:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            why = e.strerror or str(e)
    if why:
        raise KitError(f"{what} '{folder}' cannot be made ({why}); choose another folder")


def _unmakeable(folder: Path) -> str | None:
    """Why mkdir -p of folder would fail (as its error says it), found without making it:
    the nearest part of the path that is there must be a folder this user can write in."""
    there = folder.absolute()
    while not os.path.lexists(there) and there != there.parent:
        there = there.parent
    if not there.is_dir():  # a file on the way; a dangling link where a folder would be
        return os.strerror(errno.EEXIST if there.is_symlink() else errno.ENOTDIR)
    if there == folder.absolute() or os.access(there, os.W_OK | os.X_OK, effective_ids=True):
        return None
    return os.strerror(errno.EACCES)


def write_atomically(path: Path, text: str) -> None:
    """Write `path` whole or not at all: into a temporary file beside it, flushed to disk,
    then renamed over it. A reader (or a run killed mid-write) never sees half a file,
    and a symlink at `path` is replaced, never written through."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # a leftover (or a link put there) is never opened
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_output(flag: str, path: Path, text: str) -> None:
    """A file the user named for an output (--figure, --html): a regular file, or none
    yet, written whole (write_atomically: a link there is replaced, never written
    through); a device or a pipe there (/dev/stdout) written as it is. A failure is a
    KitError naming the option and the path (a full disk said only "No space left")."""
    try:
        if path.exists() and not path.is_file():
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        else:
            write_atomically(path, text)
    except OSError as e:
        raise KitError(
            f"cannot write {flag} '{path}': {e.strerror or e}; give a path with room, that "
            "you may write"
        ) from None


def size_of(path: Path) -> int:
    """Bytes in a file, or in the files under a folder on the folder's own file system:
    links are not followed, nor mounts (a squashfs ch-run has mounted in the cache counts
    as its file); what cannot be read counts nothing (a folder removed meanwhile)."""
    try:
        top = path.lstat()
    except OSError:
        return 0
    if not stat.S_ISDIR(top.st_mode):
        return top.st_size if stat.S_ISREG(top.st_mode) else 0
    total, todo = 0, [path]
    while todo:
        try:
            entries = list(os.scandir(todo.pop()))
        except OSError:
            continue
        for entry in entries:
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
                elif stat.S_ISDIR(st.st_mode) and st.st_dev == top.st_dev:
                    todo.append(entry.path)
    return total


def link_or_copy(source: Path, target: Path) -> None:
    """target as source's file: a hard link (no second copy on one file system), else a
    copy, copy-on-write where the file system can; a failed copy is one line."""
    try:
        os.link(source, target)
    except OSError:
        capture(["cp", "--reflink=auto", str(source), str(target)], f"copy {source.name}")


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes (hex), read in blocks (images and wheels are large)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary folder beside the cache (under KIT_CACHE, whose disk takes images;
    /tmp may be a small tmpfs), removed afterwards whatever happens."""
    folder = cache_dir() / "tmp"
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=prefix, dir=folder) as made:
        yield Path(made)
