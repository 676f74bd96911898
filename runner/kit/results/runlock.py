"""One kit run per results folder: a flock on LOCK_FILE held for the whole run, with a
note naming its holder, so a second run on the same folder is refused (naming who holds
it) and a dead run's folder is taken over. check_out finds the same refusal for a dry
run without taking the lock. A lock path that is not a regular file is refused in one
line (store.placed): open() of a named pipe there waited for ever (kit run --dry-run
hung), and the file is opened O_NONBLOCK, so nothing put there meanwhile blocks either.
"""

import contextlib
import os
import socket
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from kit.core import inputs
from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.paths import flock
from kit.results.store import placed, writable

LOCK_FILE = ".kit-run.lock"  # who is running a campaign in the folder now

log = logger(__name__)


@contextlib.contextmanager
def held(out_dir: Path) -> Iterator[None]:
    """One kit run per results folder: an exclusive flock on LOCK_FILE for the whole run,
    the holder (pid, host, start, command) written in it. A second run on the folder is
    refused naming the holder; a lock whose holder died (the kernel dropped its flock,
    its note is still there) is taken over, with a line saying so."""
    writable(out_dir)
    path = out_dir / LOCK_FILE
    placed(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as e:
        raise KitError(f"cannot lock '{path}': {e.strerror}; choose another --out") from None
    try:
        note = _note(fd)
        if not flock(fd):
            raise _in_use(out_dir, note)
        if note:
            log.info(
                f"kit: taking over {out_dir} from a kit run that is no longer running ({note})"
            )
        started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        mine = f"pid {os.getpid()} on {socket.gethostname()} since {started}: {_command()}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, mine.encode() + b"\n", 0)
        try:
            yield
        finally:  # ended, even by an error or ^C: the next run takes the folder silently
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def _command() -> str:
    return " ".join(["kit", *sys.argv[1:]])[:300]


def _note(fd: int) -> str:
    """Who holds the folder, as its holder wrote it in the lock file."""
    return os.pread(fd, 4096, 0).decode(errors="replace").strip()


def _in_use(out_dir: Path, note: str) -> KitError:
    return KitError(
        f"{out_dir} is in use by another kit run ({note or 'holder unknown'}); wait for it "
        "to end, or choose another --out"
    )


def check_out(out_dir: Path) -> None:
    """What held() would refuse, found without making the folder or taking its lock (the
    dry run's): a folder that cannot be made or written, one another kit run holds. The
    holder is seen in the kernel's list of locks (/proc/locks), which only a run that
    holds its flock is in; a dead run's note is left behind but its lock is not."""
    writable(out_dir, dry_run=True)
    placed(out_dir / LOCK_FILE)
    if note := writer(out_dir):
        raise _in_use(out_dir, note)


def writer(out_dir: Path, others: bool = False) -> str | None:
    """The note of the kit run that holds the folder now (None: none does); with others,
    None also when the holder is this process (a campaign registering itself as it ends)."""
    try:
        fd = os.open(out_dir / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None  # no lock file: no run has held the folder (or it cannot be read)
    try:
        note, inode = _note(fd), os.fstat(fd).st_ino
    finally:
        os.close(fd)
    holders = _flocked(inode) if note else set()
    if others:
        holders.discard(os.getpid())
    return note if holders else None


LOCKS = Path("/proc/locks")  # the kernel's list of the locks held now (Linux)


def _flocked(inode: int) -> set[int]:
    """The processes that hold a flock on a file with this inode now: from each line of
    LOCKS `1: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF` (a waiter's has `->` after
    `1:`). Without LOCKS it is not known, so none."""
    try:
        listed = inputs.read_text(LOCKS, str(LOCKS), "", inputs.JSON_LIMIT)
    except KitError:
        return set()
    held = [line.split() for line in listed.splitlines()]
    return {
        int(f[4])
        for f in held
        if len(f) > 5 and f[1:2] == ["FLOCK"] and f[5].endswith(f":{inode}") and f[4].isdigit()
    }
