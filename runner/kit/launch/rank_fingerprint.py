"""A user's command's launch fingerprint, read from the host (kit run --command).

kit's benchmarks take their own, inside the launch (benchmarks/fingerprint.py). A user's
image need hold no Python and none of kit's files, so the same take() reads the command's
first rank from outside: its /proc/PID files (maps, environ, status, cgroup, limits); the
files it sees through /proc/PID/root (its libraries' identity, /dev/shm, and /sys: the
CPUs online and transparent huge pages as its container shows them), left out where that
is not readable by us; its cgroup's limits in this host's /sys/fs/cgroup, where
/proc/PID/cgroup names it as this host sees it. It is taken once a trial, when the
command's figure is first read: the rank is then near the end of what it measures and,
almost always, still running (one that has ended gets none).
"""

from kit.core import benches
from kit.core.readers import Reader
from kit.launch import proctree

_fingerprint = benches.shared("fingerprint")


def take(pid: int, start: str, proc: str = "/proc", sys_root: str = "/sys") -> dict | None:
    """The fingerprint of process pid (started at `start`) as it sees its machine, None
    once it has ended (a zombie's maps and environ read empty)."""
    root = f"{proc}/{pid}/root"
    fp = _fingerprint.take(
        proc=proc,
        pid=str(pid),
        sys_root=f"{root}/sys",
        files=root,
        modules={},  # kit's own imports are no framework of the command's
        cgroups=f"{sys_root}/fs/cgroup",
    )
    return fp if proctree.running(pid, start, proc) else None


class FirstFigure:
    """A command's reader (kit.core.readers.Reader) that, the first time it holds a result,
    takes the fingerprint of the command's first rank among the trial's processes."""

    def __init__(self, reader: Reader, tree: proctree.Tree, program: list[str]) -> None:
        self.reader, self.tree, self.program = reader, tree, program
        self.tried = False
        self.fingerprint: dict | None = None

    def line(self, text: str) -> None:
        self.reader.line(text)
        if not self.tried and isinstance(self.reader.result(), dict):
            self.tried = True
            self.tree.scan()  # a rank started since the last look is among them
            if rank := proctree.first_rank(self.tree.processes(), self.program):
                self.fingerprint = take(*rank)

    def result(self) -> dict | str | None:
        return self.reader.result()
