"""A trial's processes, as /proc shows them: the tree under its launcher, the processes
elsewhere that carry its marker (KIT_TRIAL, in the environment kit starts it with: a
container's ranks run under their engine, not under kit), and the CPU time of both beside
the machine's, the host-load record's evidence (hostload). Also what one of them is
(describe: its rank, command and CPU), which of them runs a user's command's first rank
(first_rank), and which MPI library files they mapped.

Helpers leave the launcher's process group: MPI launchers put each rank in a session of
its own, and Apptainer's squashfuse mount daemon also clears its environment and outlives
its parent. So the tree is remembered look by look while the trial runs (Tree), and what
it ever held, with what carries the marker, is what stopping the trial stops.
"""

import os
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from kit.image.foreign import MPI_LIBRARIES
from kit.launch import hostload

Key = tuple[int, str]  # one process: its pid and start time (a reused pid is another)


class Stat(NamedTuple):
    """What a look at the process tree needs of /proc/PID/stat (CPU in clock ticks)."""

    name: str  # comm: the executable's name, which an exec changes
    zombie: bool
    ppid: int
    start: str
    cpu: int  # utime + stime
    reaped: int  # cutime + cstime: the children it waited for, with theirs


def _read(pid: int, proc: str = "/proc") -> Stat | None:
    """pid's stat, a zombie's too (its times are final); None once it is gone."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            head, _, rest = f.read().rpartition(b")")
        x = rest.split()
        name = head.partition(b"(")[2].decode(errors="replace")
        cpu, reaped = int(x[11]) + int(x[12]), int(x[13]) + int(x[14])
        return Stat(name, x[0] == b"Z", int(x[1]), x[19].decode(), cpu, reaped)
    except (OSError, IndexError, ValueError):
        return None


def _stat(pid: int, proc: str = "/proc") -> tuple[int, str] | None:
    """(parent pid, start time) of pid, or None once it is gone or a zombie."""
    st = _read(pid, proc)
    return None if st is None or st.zombie else (st.ppid, st.start)


def started(pid: int, proc: str = "/proc") -> str | None:
    """pid's start time (with the pid, which process it is), None once it is gone or a
    zombie."""
    return st[1] if (st := _stat(pid, proc)) else None


def running(pid: int, start: str | None, proc: str = "/proc") -> bool:
    """Whether pid is still the process that started at `start` (not a zombie, and not
    another process that reused its pid)."""
    return start is not None and started(pid, proc) == start


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _procs() -> dict[int, Stat]:
    """Every process's stat now."""
    return {pid: st for pid in _pids() if (st := _read(pid))}


def _parent(st: Stat, procs: dict[int, Stat]) -> Key | None:
    return (st.ppid, procs[st.ppid].start) if st.ppid in procs else None


def trial_of(pid: int) -> str | None:
    """The trial marker (KIT_TRIAL) in pid's environment, if it is readable by us."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(b"KIT_TRIAL="):
            return entry.removeprefix(b"KIT_TRIAL=").decode(errors="replace")
    return None


def _carries(pid: int, marker: str) -> bool:
    return trial_of(pid) == marker


def marked(marker: str | re.Pattern[str]) -> list[int]:
    """Pids (readable by us, never this one) whose trial marker is `marker`, or matches it
    whole (a pattern: the trials of a campaign)."""
    me = os.getpid()
    if isinstance(marker, str):
        return [pid for pid in _pids() if pid != me and _carries(pid, marker)]
    return [pid for pid in _pids() if pid != me and marker.fullmatch(trial_of(pid) or "")]


RANK_VARS = (b"PMI_RANK=", b"OMPI_COMM_WORLD_RANK=", b"SLURM_PROCID=")
SHEBANG_WORDS = 2  # what a script's #! line puts before its path: an interpreter, an argument


def _rank(environ: list[bytes]) -> int | None:
    """The rank its launcher gave a process (environ's entries), None where it gave none."""
    return next(
        (int(v.split(b"=", 1)[1]) for v in environ for p in RANK_VARS if v.startswith(p)), None
    )


def describe(pid: int) -> dict | None:
    """Rank (from the launcher's environment, if readable), command and CPU seconds of pid."""
    proc = Path(f"/proc/{pid}")
    try:
        cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        environ = (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return None
    if (st := _read(pid)) is None:
        return None
    rank, cpu_s = _rank(environ), st.cpu / hostload.TICK
    return {"pid": pid, "rank": rank, "cpu_s": round(cpu_s, 1), "command": cmd.strip()[:200]}


def runs(argv: list[str], program: list[str]) -> bool:
    """Whether a process's argv is the program's as launched: the same words, or behind
    the interpreter (and its argument) of the script's #! line; the first word by name
    only (its launcher found it on PATH). A launcher's argv (mpirun, docker run, apptainer
    exec) ends with the program too, after more words than a #! line puts."""
    name = os.path.basename(program[0])
    return any(
        len(rest) == len(program) and rest[1:] == program[1:] and os.path.basename(rest[0]) == name
        for rest in (argv[k:] for k in range(SHEBANG_WORDS + 1))
    )


def first_rank(pids: list[int], program: list[str], proc: str = "/proc") -> Key | None:
    """Which of pids runs a command's first rank (pid, start time): of those running the
    program (runs), the lowest rank a launcher gave (none: one rank), the first started
    (workers forked from it run the same argv); None where none is readable by us."""
    found = []
    for pid in set(pids):
        try:
            argv = Path(f"{proc}/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
            environ = Path(f"{proc}/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv]
        if (start := started(pid, proc)) is not None and runs(words, program):
            rank = _rank(environ)
            found.append(((rank is None, rank or 0, int(start), pid), (pid, start)))
    return min(found)[1] if found else None


def mapped_mpi(pids: list[int]) -> set[str]:
    """The MPI library files (by ABI family, foreign.MPI_LIBRARIES) these processes have
    mapped, as each sees its file system (inside its container)."""
    found = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        for line in maps.splitlines():
            path = line.split(None, 5)[-1] if line.count(" ") >= 5 else ""
            name = path.rsplit("/", 1)[-1]
            if path.startswith("/") and any(p.match(name) for p, _ in MPI_LIBRARIES):
                found.add(path)
    return found


class Tree:
    """Remembers every process that descends from root while the trial runs, finds those
    outside it that carry the trial's marker (a container's, which run under its engine),
    and counts the CPU time of both beside the whole machine's, one look (scan) at a time.

    CPU is counted stretch by stretch, from one look to the next, with the machine's
    (/proc/stat) read in the same look, so both cover the same instants. A process's total
    is utime+stime+cutime+cstime: its own time and that of the children it waited for (with
    theirs), so a child too short-lived to be seen is counted in its parent. A stretch's
    own CPU is the trial's processes' totals now minus at the last look, and counts each
    second once: a process that ended meanwhile, waited for by a parent still watched, has
    its whole time in that parent's cutime now, no longer in its own (checked: the parent's
    cutime grew by at least what its ended children held when last seen, which a parent
    ignoring SIGCHLD never adds). A stretch in which a process ended otherwise (the root,
    waited for by kit; a container's init, by the engine; an orphan, by init) lost what it
    used since the last look: that stretch is left out of the window, the machine's time
    with the trial's, so no share is skewed by it. The window is the trial's stretches
    but those: usually all but the last one or two.

    A process outside the tree is checked for the marker once (one read of its environ)
    by pid, start time and name: an exec that gives a process the marker also renames it
    (runc's init becoming the container's docker-init or catatonit), and is checked again.
    A container process that clears its environment counts in its parent once waited for.

    The runtime's helpers (`helpers`: process names, Runtime.helpers) do its work for the
    trial without the marker, in the tree or outside it (an engine, a shim, conmon, a FUSE
    or user-mode network daemon): their CPU is counted apart (window.helper_s), from the
    Tree's making on, over the same stretches, and never as the trial's own nor as outside
    load. A helper's own CPU counts, not its reaped children's: an engine also waits for
    other users' work (a build's steps under dockerd), which is not this trial's; the
    runc a shim waits for at a container's start is left to 'other' (a fraction of a
    second). A helper that ends loses what it used since the last look. A shared helper
    (an engine) counts whole, its own work for others included.
    """

    def __init__(self, root: int, marker: str = "", helpers: Iterable[str] = ()) -> None:
        self.root, self.marker = root, marker
        self.helpers = frozenset(helpers)
        self.seen: dict[int, str] = {}  # pid -> start time (guards against pid reuse)
        self.parent: dict[int, tuple[int, str | None]] = {}  # pid -> its parent when first seen
        self.root_start = started(root)
        self.marked: set[Key] = set()  # outside the tree, with the marker, at the last look
        self.unmarked: set[tuple[int, str, str]] = set()  # checked: pid, start time, name
        # the trial's processes at the last look: total CPU, reaped CPU (ticks), parent
        self.cpu: dict[Key, tuple[int, int, Key | None]] = {}
        self.machine = hostload.cpu()  # at the last look
        # the runtime's helpers at the last look: the CPU each used itself (ticks)
        self.helper_cpu = self._helpers(_procs()) if self.helpers else {}
        self.window = hostload.Window()
        self.lock = threading.Lock()  # the watch's looks and kit's own at the end

    def scan(self) -> None:
        """One look at /proc: the tree's new descendants, the marked processes, their CPU."""
        with self.lock:
            machine = hostload.cpu()
            procs = _procs()
            children: dict[int, list[int]] = {}
            for pid, st in procs.items():
                if not st.zombie:
                    children.setdefault(st.ppid, []).append(pid)
            todo = [self.root, *self.seen]
            while todo:
                parent = todo.pop()
                for child in children.get(parent, []):
                    if child not in self.seen:
                        self.seen[child] = procs[child].start
                        self.parent[child] = (parent, self.seen.get(parent, self.root_start))
                        todo.append(child)
            self._count(self._trial(procs), procs, machine)

    def _trial(self, procs: dict[int, Stat]) -> dict[Key, Stat]:
        """The trial's processes now: the root, its descendants and the marked ones."""
        trial: dict[Key, Stat] = {}
        marked: set[Key] = set()
        unmarked: set[tuple[int, str, str]] = set()
        me = os.getpid()
        for pid, st in procs.items():
            key, checked = (pid, st.start), (pid, st.start, st.name)
            if (pid == self.root and st.start == self.root_start) or self.seen.get(pid) == st.start:
                trial[key] = st
            elif not self.marker or pid == me:
                continue
            elif key in self.marked or (
                checked not in self.unmarked and _carries(pid, self.marker)
            ):
                trial[key] = st
                marked.add(key)
            else:
                unmarked.add(checked)
        self.marked, self.unmarked = marked, unmarked
        return trial

    def _helpers(self, procs: dict[int, Stat]) -> dict[Key, int]:
        """The runtime's helpers among procs: the CPU (ticks) each used itself."""
        return {(pid, st.start): st.cpu for pid, st in procs.items() if st.name in self.helpers}

    def _count(self, trial: dict[Key, Stat], procs: dict[int, Stat], machine: hostload.Cpu) -> None:
        """Add the stretch since the last look to the window, unless one of the trial's
        processes ended in it without its time reaching a watched parent (see the class)."""
        cpu: dict[Key, tuple[int, int, Key | None]] = {}
        for key, st in trial.items():
            cpu[key] = (st.cpu + st.reaped, st.reaped, _parent(st, procs))
        helpers = self._helpers(procs) if self.helpers else {}
        held: dict[Key, int] = {}  # a watched parent -> what its ended children held
        whole = True
        for key, (total, _, parent) in self.cpu.items():
            if key in cpu:
                continue
            if parent in cpu and parent in self.cpu:
                held[parent] = held.get(parent, 0) + total
            else:
                whole = False
        if whole and all(cpu[p][1] - self.cpu[p][1] >= ticks for p, ticks in held.items()):
            own = sum(c[0] for c in cpu.values()) - sum(c[0] for c in self.cpu.values())
            # each helper's CPU since the last look (a new one's whole: it started since)
            ticks = {key: n - self.helper_cpu.get(key, 0) for key, n in helpers.items()}
            helper = sum(ticks.values())
            own -= sum(n for key, n in ticks.items() if key in cpu)  # a helper in the tree
            tick = hostload.TICK
            self.window = self.window.plus(self.machine, machine, own / tick, helper / tick)
        self.cpu, self.machine, self.helper_cpu = cpu, machine, helpers

    def processes(self) -> list[int]:
        """The trial's processes at the last look: the root, its descendants still running
        and those marked (a container's ranks run under their engine)."""
        return [self.root, *self.alive(), *(pid for pid, _ in self.marked)]

    def alive(self) -> list[int]:
        seen = list(self.seen.items())  # at once: a look may be adding to it
        return [pid for pid, start in seen if running(pid, start)]
