"""A named pipe nothing writes to, for tests of code that must not wait on one: the test
starts `unblocked(path)` first, so code that still waits in open() gets an end of file and
the test fails, never hangs."""

import contextlib
import os
import threading
import time
from pathlib import Path

FIRST_S = 30.0  # long after any wait kit gives a pipe in a test, however loaded the host


def _unblock(path: Path) -> None:
    """From FIRST_S on, every few seconds for a minute, open a pipe for writing and close
    it: a reader waiting in open() gets its end of file (a test that fails, never one that
    hangs). Not sooner: a reader that kit gives a short wait (PIPE_WAIT) and that was slow
    to start would see that end of file as an empty file, not a silent pipe."""
    time.sleep(FIRST_S)
    for _ in range(20):
        with contextlib.suppress(OSError):  # ENXIO: no reader waits now
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        time.sleep(3)


def unblocked(path: Path) -> None:
    """Make a named pipe at path, and unblock its readers in the background (_unblock)."""
    os.mkfifo(path)
    threading.Thread(target=_unblock, args=(path,), daemon=True).start()
