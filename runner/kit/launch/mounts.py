"""Apptainer's mount daemons left without their Apptainer.

Apptainer stops the squashfuse daemon it started when its container ends. If that
Apptainer process dies first (seen here under load), the daemon lives on alone in its
mount namespace, still holding the rank's output pipes, and mpirun waits on them until
the trial's timeout. A daemon whose parent has been gone ORPHAN_GRACE_S serves no
container: it is stopped, and the trial goes on.
"""

import contextlib
import os
import signal
import time
from pathlib import Path

from kit.core.log import logger
from kit.launch.proctree import Tree, running

MOUNT_DAEMONS = frozenset({"squashfuse", "squashfuse_ll"})
ORPHAN_GRACE_S = 5.0  # Apptainer's own clean-up waits 1 s for the daemon, then ends it

log = logger(__name__)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class Orphans:
    """One trial's mount daemons found without their parent: since when, and which of them
    were stopped (each once)."""

    def __init__(self) -> None:
        self.orphaned: dict[int, float] = {}  # mount daemon -> when its parent was found gone
        self.stopped: set[int] = set()

    def stop(self, tree: Tree) -> None:
        """Stop each mount daemon of the tree whose parent has been gone ORPHAN_GRACE_S."""
        now = time.monotonic()
        for pid, (parent, started) in list(tree.parent.items()):
            # Cheapest test first: this runs every look, beside the measurement.
            if pid in self.stopped or running(parent, started):
                continue
            if not running(pid, tree.seen[pid]) or (name := _comm(pid)) not in MOUNT_DAEMONS:
                continue
            if now - self.orphaned.setdefault(pid, now) >= ORPHAN_GRACE_S:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
                self.stopped.add(pid)
                log.info(
                    f"kit: stopped {name} (pid {pid}): the Apptainer that started it exited "
                    "without stopping it"
                )
