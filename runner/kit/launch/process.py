"""One trial: start a command in its own session, collect its record, leave nothing behind.

The launcher runs in a new session so a Ctrl-C or a timeout can stop the whole
process group (mpirun and every rank), not only the launcher. Helpers leave that
group: MPI launchers put each rank in a session of its own, and Apptainer's
squashfuse mount daemon also clears its environment and outlives its parent. So
the trial's process tree is watched while it runs and every process ever seen in
it is stopped at the end, as is any process carrying the trial's KIT_TRIAL
marker (a child that escaped between two looks). What lives outside this tree
entirely (a Docker container) is removed by the runtime's own clean-up. The same
looks count the CPU time of the trial's processes, tree and marked (a container's
ranks too), beside the machine's: the host-load record's evidence (hostload).
"""

import contextlib
import fcntl
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple, Protocol

from kit.core import benches
from kit.image.foreign import MPI_LIBRARIES
from kit.launch import hostload

GRACE_S = 5.0
# On a timeout each stuck Python rank is asked for its threads' stacks (benchmarks/kitbench.py
# registers faulthandler on this signal), so the record says where it hung, not only that it did.
STACK_SIGNAL = signal.SIGUSR1
STACK_WAIT_S = 2.0
TAIL_LINES = 20
TIMEOUT_TAIL_LINES = 120  # room for the stacks
# A trial's output is read as it is printed, and what is kept of it is bounded, however much
# it prints (see Capture):
TAIL_BYTES = 1 << 20  # the last MiB of stdout and of stderr: the log a trial not ok keeps
TAIL_CHARS = 32 << 10  # the record's output_tail, at most (its last lines may be long)
LINE_BYTES = 16 << 20  # a longer stdout line is not read for the result (a kit record of
# 10^5 steps is about 5 MB)
PIPE_BYTES = 1 << 20  # each pipe's buffer, where the kernel allows: a writer waits only
# when kit's reader is that far behind
CHUNK_BYTES = 1 << 16
POLL_MS = 100  # how soon a pipe's reader sees that the trial was stopped
DRAIN_S = 2.0  # then how long it may read what a process outside the tree still writes


@dataclass(frozen=True)
class Outcome:
    status: str  # ok | failed | timeout | interrupted
    exit_code: int | None
    wall_s: float
    result: dict | None
    output_tail: str
    stuck: tuple[dict, ...] = ()  # on timeout: the processes still running, ranks first
    cause: str = ""  # a failed trial ended by a signal: which, as far as can be told
    oom_killed: bool = False  # a rank died of SIGKILL while the kernel's OOM killer acted
    mpi_loaded: tuple[str, ...] = ()  # watched for: the MPI library files its ranks mapped
    output: str = ""  # a trial that did not end ok: what it printed (stderr, then stdout),
    # the last TAIL_BYTES of each, headed by how many bytes were cut
    # watched: the machine's CPU time and the trial's own (window.own_s), over the same
    # instants (Tree); None where nothing here watched it (a Slurm job)
    window: hostload.Window | None = None


# Who reports a rank's death by a signal, and how: MPICH's Hydra (4.x, then 3.x), Open MPI
SIGNAL_REPORTS = (
    re.compile(r"TERMINATED WITH THE EXIT STRING: .*\(signal (\d+)\)"),
    re.compile(r"KILLED BY SIGNAL: (\d+)"),
    re.compile(r"exited on signal (\d+)"),
)


def oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has ended on this host since boot
    (/proc/vmstat, readable by anyone; the count covers every cgroup, a container's too)."""
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def ending_signal(exit_code: int | None, output: str) -> int | None:
    """The signal that ended a rank: the MPI launcher's own report, our child killed by one
    (a negative code), or a launcher or container engine exiting 128+N (Docker, Podman,
    shells)."""
    number = None
    for pattern in SIGNAL_REPORTS:
        if m := pattern.search(output):
            number = int(m.group(1))
    if number is None and exit_code is not None:
        if exit_code < 0:
            number = -exit_code
        elif 128 < exit_code < 128 + signal.NSIG:
            number = exit_code - 128
    return number


def cause(exit_code: int | None, output: str, oom_kills: int = 0) -> str:
    """Why a trial failed when a signal ended a rank. SIGKILL is what the kernel's OOM
    killer sends: when the host counted OOM kills during the trial, that is the cause."""
    try:
        name = signal.Signals(ending_signal(exit_code, output) or 0).name
    except ValueError:
        return ""
    if name == "SIGKILL" and oom_kills:
        kills = f"{oom_kills} OOM kill{'s' if oom_kills > 1 else ''} on this host during the trial"
        return f"a rank was killed by the kernel's OOM killer (SIGKILL; {kills})"
    why = " (the kernel's OOM killer sends it, as does kill -9)" if name == "SIGKILL" else ""
    return f"a rank was killed by {name}{why}"


RANK_VARS = (b"PMI_RANK=", b"OMPI_COMM_WORLD_RANK=", b"SLURM_PROCID=")


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
    rank = next(
        (int(v.split(b"=", 1)[1]) for v in environ for p in RANK_VARS if v.startswith(p)), None
    )
    cpu_s = st.cpu / hostload.TICK
    return {"pid": pid, "rank": rank, "cpu_s": round(cpu_s, 1), "command": cmd.strip()[:200]}


def still_running(tree: "Tree", marker: str) -> tuple[dict, ...]:
    """What a timed-out trial was still doing: ranks (in rank order), then their launchers;
    marked processes count too (ranks inside a Docker container are outside the tree)."""
    tree.scan()
    pids = {tree.root, *tree.alive(), *marked(marker)}
    found = [d for pid in pids if (d := describe(pid))]
    found.sort(key=lambda d: (d["rank"] is None, d["rank"] or 0, d["pid"]))
    return tuple(found)


def ask_for_stacks(stuck: tuple[dict, ...]) -> None:
    """Signal every stuck Python rank to print its stacks on stderr, then give them time."""
    pids = [d["pid"] for d in stuck if d["rank"] is not None and "python" in d["command"]]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, STACK_SIGNAL)
    if pids:
        time.sleep(STACK_WAIT_S)


class Reader(Protocol):
    """How a trial's result is read: its standard output a line at a time, as it is printed
    (never held whole), then the result, or why there is none (a str; None: no word)."""

    def line(self, text: str) -> None: ...

    def result(self) -> dict | str | None: ...


class BenchRecord:
    """The kit benchmark's record: the last stdout line that is a kit.bench JSON object."""

    def __init__(self) -> None:
        self.record: dict | None = None

    def line(self, text: str) -> None:
        text = text.strip()
        if not text.startswith("{"):
            return
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, an int too long, nested too deep
            return
        if isinstance(record, dict) and record.get("schema") == benches.SCHEMA:
            self.record = record

    def result(self) -> dict | None:
        return self.record


def parse_result(stdout: str) -> dict | None:
    """The benchmark's record in an output held whole (a test's, a command's)."""
    reader = BenchRecord()
    for line in stdout.splitlines():
        reader.line(line)
    return reader.result()


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


def _pump(pipe: IO[bytes], capture: Capture, stopped: threading.Event) -> None:
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


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


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


# Mount daemons that Apptainer starts and must stop itself (see Tree.stop_orphaned_mounts).
MOUNT_DAEMONS = frozenset({"squashfuse", "squashfuse_ll"})
ORPHAN_GRACE_S = 5.0  # Apptainer's own clean-up waits 1 s for the daemon, then ends it


class Stat(NamedTuple):
    """What a look at the process tree needs of /proc/PID/stat (CPU in clock ticks)."""

    name: str  # comm: the executable's name, which an exec changes
    zombie: bool
    ppid: int
    start: str
    cpu: int  # utime + stime
    reaped: int  # cutime + cstime: the children it waited for, with theirs


def _read(pid: int) -> Stat | None:
    """pid's stat, a zombie's too (its times are final); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            head, _, rest = f.read().rpartition(b")")
        x = rest.split()
        name = head.partition(b"(")[2].decode(errors="replace")
        cpu, reaped = int(x[11]) + int(x[12]), int(x[13]) + int(x[14])
        return Stat(name, x[0] == b"Z", int(x[1]), x[19].decode(), cpu, reaped)
    except (OSError, IndexError, ValueError):
        return None


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of pid, or None once it is gone or a zombie."""
    st = _read(pid)
    return None if st is None or st.zombie else (st.ppid, st.start)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


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


Key = tuple[int, str]  # one process: its pid and start time (a reused pid is another)


class Tree(threading.Thread):
    """Remembers every process that descends from root while the trial runs, finds those
    outside it that carry the trial's marker (a container's, which run under its engine),
    and counts the CPU time of both beside the whole machine's (and, when asked, finds
    which MPI library the ranks load: a user's command does not say).

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
    """

    def __init__(
        self, root: int, every_s: float = 0.25, marker: str = "", watch_mpi: bool = False
    ) -> None:
        super().__init__(daemon=True)
        self.root, self.every_s, self.watch_mpi = root, every_s, watch_mpi
        self.marker = marker
        self.mpi_loaded: set[str] = set()
        self.seen: dict[int, str] = {}  # pid -> start time (guards against pid reuse)
        self.parent: dict[int, tuple[int, str | None]] = {}  # pid -> its parent when first seen
        self.orphaned: dict[int, float] = {}  # mount daemon -> when its parent was found gone
        self.stopped: set[int] = set()
        self.root_start = st[1] if (st := _stat(root)) else None
        self.done = threading.Event()
        self.marked: set[Key] = set()  # outside the tree, with the marker, at the last look
        self.unmarked: set[tuple[int, str, str]] = set()  # checked: pid, start time, name
        # the trial's processes at the last look: total CPU, reaped CPU (ticks), parent
        self.cpu: dict[Key, tuple[int, int, Key | None]] = {}
        self.machine = hostload.cpu()  # at the last look
        self.window = hostload.Window()
        self.lock = threading.Lock()  # the run's looks and kit's own at the end

    def scan(self) -> None:
        """One look at /proc: the tree's new descendants, the marked processes, their CPU."""
        with self.lock:
            machine = hostload.cpu()
            procs = {pid: st for pid in _pids() if (st := _read(pid))}
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

    def _count(self, trial: dict[Key, Stat], procs: dict[int, Stat], machine: hostload.Cpu) -> None:
        """Add the stretch since the last look to the window, unless one of the trial's
        processes ended in it without its time reaching a watched parent (see the class)."""
        cpu: dict[Key, tuple[int, int, Key | None]] = {}
        for key, st in trial.items():
            parent = (st.ppid, procs[st.ppid].start) if st.ppid in procs else None
            cpu[key] = (st.cpu + st.reaped, st.reaped, parent)
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
            self.window = self.window.plus(self.machine, machine, own / hostload.TICK)
        self.cpu, self.machine = cpu, machine

    def stop_orphaned_mounts(self) -> None:
        """Apptainer stops the squashfuse daemon it started when its container ends. If that
        Apptainer process dies first (seen here under load), the daemon lives on alone in
        its mount namespace, still holding the rank's output pipes, and mpirun waits on them
        until the trial's timeout. A daemon whose parent has been gone ORPHAN_GRACE_S serves
        no container: it is stopped, and the trial goes on."""
        now = time.monotonic()
        for pid, (parent, started) in list(self.parent.items()):
            # Cheapest test first: this runs every scan, beside the measurement.
            if pid in self.stopped or ((st := _stat(parent)) and st[1] == started):
                continue
            alive = _stat(pid)
            if not alive or alive[1] != self.seen[pid] or (name := _comm(pid)) not in MOUNT_DAEMONS:
                continue
            if now - self.orphaned.setdefault(pid, now) >= ORPHAN_GRACE_S:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
                self.stopped.add(pid)
                print(
                    f"kit: stopped {name} (pid {pid}): the Apptainer that started it exited "
                    "without stopping it",
                    file=sys.stderr,
                    flush=True,
                )

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            self.scan()
            self.stop_orphaned_mounts()
            if self.watch_mpi and not self.mpi_loaded:  # ranks in a container: by their marker
                ranks = [self.root, *self.alive(), *(pid for pid, _ in self.marked)]
                self.mpi_loaded = mapped_mpi(ranks)

    def alive(self) -> list[int]:
        seen = list(self.seen.items())  # at once: a look may be adding to it
        return [pid for pid, start in seen if (st := _stat(pid)) and st[1] == start]


def _signal_all(pgid: int, pids: list[int], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop(proc: subprocess.Popen, tree: Tree, marker: str) -> None:
    """SIGTERM the group and every tracked or marked process, then SIGKILL what remains."""
    tree.done.set()
    tree.scan()

    def left() -> list[int]:
        return sorted(set(tree.alive()) | set(marked(marker)))

    _signal_all(proc.pid, left(), signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None and not left():
            return
        time.sleep(0.1)
    _signal_all(proc.pid, left(), signal.SIGKILL)
    proc.wait()


def run(
    argv: list[str],
    env: dict[str, str],
    timeout: float,
    marker: str,
    cleanup: Callable[[], None],
    read: Callable[[], Reader] | None = None,
    watch_mpi: bool = False,
) -> Outcome:
    """Run argv to completion, timeout or Ctrl-C. The result is read from all of its
    standard output as it is printed (read: makes a user's command's reader; by default
    the kit benchmark's record), and only the tail of each stream is kept (Capture).

    Each stream is a pipe with a thread of its own reading it (_pump), never waited on:
    the end of the launcher, not the end of every inherited descriptor, ends the wait,
    and once the tree is stopped each reader takes what its pipe still holds and ends. A
    pipe, unlike a file, can be read as it fills and loses nothing: a file capped by
    truncating would drop what a rank wrote between kit's last read and the cut. The
    reading costs kit CPU time beside the trial in proportion to what it prints (nothing
    to speak of for a benchmark's few lines)."""
    env = {**env, "KIT_TRIAL": marker}
    kills_before = oom_kills()
    reader = (read or BenchRecord)()
    out, err, stopped = Capture(reader), Capture(), threading.Event()
    t0 = time.monotonic()
    with subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    ) as proc:  # its end closes the pipes
        pumps = [
            threading.Thread(target=_pump, args=(pipe, capture, stopped), daemon=True)
            for pipe, capture in ((proc.stdout, out), (proc.stderr, err))
        ]
        for pump in pumps:
            pump.start()
        tree = Tree(proc.pid, marker=marker, watch_mpi=watch_mpi)
        tree.start()
        status, stuck = None, ()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status, stuck = "timeout", still_running(tree, marker)
            ranks = sorted({d["rank"] for d in stuck if d["rank"] is not None})
            print(
                f"kit: trial {marker} timed out after {timeout:g} s; still running: "
                + (f"ranks {', '.join(map(str, ranks))}" if ranks else f"{len(stuck)} processes")
                + "; stopping it",
                file=sys.stderr,
                flush=True,
            )
            ask_for_stacks(stuck)
        except KeyboardInterrupt:
            status = "interrupted"
        finally:
            wall = time.monotonic() - t0
            try:
                stop(proc, tree, marker)
                cleanup()
            finally:  # the readers end before the pipes close, whatever happened
                stopped.set()
                for pump in pumps:
                    pump.join()
    stdout, stderr = out.text(), err.text()
    result, unread = read_result(reader)
    if status is None:
        status = "ok" if ended_ok(proc.returncode, result, stderr) else "failed"
    lines = TIMEOUT_TAIL_LINES if status == "timeout" else TAIL_LINES
    tail = "\n".join((stderr + stdout).strip().splitlines()[-lines:])[-TAIL_CHARS:]
    why, oom = "", False
    if status == "failed":
        kills_after = oom_kills()
        kills = 0 if kills_before is None or kills_after is None else kills_after - kills_before
        why = cause(proc.returncode, stderr + stdout, kills)
        oom = kills > 0 and ending_signal(proc.returncode, stderr + stdout) == signal.SIGKILL
        if not why and proc.returncode == 0:
            why = unread
    loaded = tuple(sorted(tree.mpi_loaded))
    whole = "" if status == "ok" else f"== stderr ==\n{stderr}\n== stdout ==\n{stdout}"
    return Outcome(
        status, proc.returncode, wall, result, tail, stuck, why, oom, loaded, whole, tree.window
    )


# What benchmarks/kitbench.py prints when a rank leaves MPI_Finalize after its watchdog
# (MPICH 4.0: rarely, both ranks spin in MPI_Finalize after the final barrier).
LEFT_UNFINALIZED = "kitbench: MPI_Finalize did not return"


def ended_ok(returncode: int | None, result: dict | None, stderr: str) -> bool:
    """A trial that printed its result ended well: with exit status 0, or with a rank that
    left MPI_Finalize after everything was measured and printed (MPICH's launcher then ends
    the job's other ranks with SIGKILL, and exits non-zero)."""
    return result is not None and (returncode == 0 or LEFT_UNFINALIZED in stderr)


def read_result(reader: Reader) -> tuple[dict | None, str]:
    """The result the reader found, or None and why: the reader's own words, or the
    figure in it that is not finite and above 0 (benches.figure_problem)."""
    got = reader.result()
    if isinstance(got, str):
        return None, got
    if got is not None and (why := benches.figure_problem(str(got.get("bench")), got)):
        return None, why
    return got, ""
