"""A named pipe nothing writes to, for tests of code that must not wait on one: the test
starts `unblocked(path)` first, so code that still waits in open() gets an end of file and
the test fails, never hangs."""

import contextlib
import os
import threading
import time
from pathlib import Path


def _unblock(path: Path) -> None:
    """Every few seconds for a minute, open a pipe for writing and close it: a reader
    waiting in open() gets its end of file (a test that fails, never one that hangs)."""
    for _ in range(20):
        time.sleep(3)
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def unblocked(path: Path) -> None:
    """Make a named pipe at path, and unblock its readers in the background (_unblock)."""
    os.mkfifo(path)
    threading.Thread(target=_unblock, args=(path,), daemon=True).start()
