"""A trial's output streams, read as they are printed and kept bounded however much it
prints: each stdout line goes to the result's reader (kit.core.readers) as it arrives, and
the last TAIL_BYTES of each stream are kept, the log of a trial that did not end ok.

A pipe, unlike a file, can be read as it fills and loses nothing: a file capped by
truncating would drop what a rank wrote between kit's last read and the cut. A Slurm
job's output file is read the same way once the job has ended (read_file).
"""

import contextlib
import fcntl
import os
import select
import threading
import time
from pathlib import Path
from typing import IO

from kit.core.readers import Reader

TAIL_BYTES = 1 << 20  # the last MiB of stdout and of stderr: the log a trial not ok keeps
LINE_BYTES = 16 << 20  # a longer stdout line is not read for the result (a kit record of
# 10^5 steps is about 5 MB)
PIPE_BYTES = 1 << 20  # each pipe's buffer, where the kernel allows: a writer waits only
# when kit's reader is that far behind
CHUNK_BYTES = 1 << 16
POLL_MS = 100  # how soon a pipe's reader sees that the trial was stopped
DRAIN_S = 2.0  # then how long it may read what a process outside the tree still writes


class Capture:
    """One output stream of a trial, kept bounded however much it prints: its last
    TAIL_BYTES, how many bytes before them were cut, and (stdout) each line handed to the
    result's reader as it arrives, so the result is read from all of the output without
    holding it (a line longer than LINE_BYTES is skipped)."""

    def __init__(self, reader: Reader | None = None) -> None:
        self.reader = reader
        self.kept = bytearray()
        self.total = 0
        self.line = bytearray()  # the line not yet ended
        self.overlong = False  # it passed LINE_BYTES: skipped up to its end

    def take(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.kept += chunk
        if len(self.kept) > 2 * TAIL_BYTES:  # cut now and then, not at every chunk
            del self.kept[:-TAIL_BYTES]
        if self.reader is None:
            return
        *ended, rest = chunk.split(b"\n")
        for piece in ended:
            self._extend(piece)
            self._give()
        self._extend(rest)

    def end(self) -> None:
        """The stream ended: its last line counts without a newline too."""
        if self.reader is not None and self.line:
            self._give()

    def _extend(self, piece: bytes) -> None:
        if not self.overlong:
            self.line += piece
            if len(self.line) > LINE_BYTES:
                self.line.clear()
                self.overlong = True

    def _give(self) -> None:
        """The line ended: to the reader, split at a carriage return too, as Python reads
        text (a progress bar's updates are lines of their own)."""
        if not self.overlong:
            for text in self.line.decode(errors="replace").removesuffix("\r").split("\r"):
                self.reader.line(text)
        self.line.clear()
        self.overlong = False

    def text(self) -> str:
        """What is kept, headed by how much was cut before it."""
        kept = self.kept[-TAIL_BYTES:]
        cut = self.total - len(kept)
        return (f"… {cut} bytes cut …\n" if cut else "") + kept.decode(errors="replace")


def pump(pipe: IO[bytes], capture: Capture, stopped: threading.Event) -> None:
    """Read one of the trial's pipes into its capture as it fills, until every writer has
    closed it or, once the trial is stopped (its tree is gone), until it is empty: a process
    outside the tree that holds it open may not hold up the trial (DRAIN_S at most)."""
    fd = pipe.fileno()
    with contextlib.suppress(OSError):  # a larger buffer where the kernel allows it
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    os.set_blocking(fd, False)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    deadline = None
    while deadline is None or time.monotonic() < deadline:
        if stopped.is_set() and deadline is None:
            deadline = time.monotonic() + DRAIN_S
        if not poller.poll(0 if deadline else POLL_MS):
            if deadline:
                break
            continue
        try:
            chunk = os.read(fd, CHUNK_BYTES)
        except BlockingIOError:
            continue
        if not chunk:
            break
        capture.take(chunk)
    capture.end()


def read_file(path: Path, reader: Reader) -> Capture:
    """A file's output (a Slurm job's) read as a trial's stdout is: each line to the
    reader, the last TAIL_BYTES kept (no file: nothing printed)."""
    capture = Capture(reader)
    if path.is_file():
        with path.open("rb") as f:
            while chunk := f.read(CHUNK_BYTES):
                capture.take(chunk)
    capture.end()
    return capture
