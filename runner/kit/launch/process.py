"""One trial: start a command in its own session, collect its record, leave nothing behind.

The launcher runs in a new session so a Ctrl-C or a timeout can stop the whole
process group (mpirun and every rank), not only the launcher. Helpers leave that
group: MPI launchers put each rank in a session of its own, and Apptainer's
squashfuse mount daemon also clears its environment and outlives its parent. So
the trial's process tree is watched while it runs and every process ever seen in
it is stopped at the end, as is any process carrying the trial's KIT_TRIAL
marker (a child that escaped between two looks). What lives outside this tree
entirely (a Docker container) is removed by the runtime's own clean-up.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit.core import benches
from kit.image.foreign import MPI_LIBRARIES

GRACE_S = 5.0
# On a timeout each stuck Python rank is asked for its threads' stacks (benchmarks/kitbench.py
# registers faulthandler on this signal), so the record says where it hung, not only that it did.
STACK_SIGNAL = signal.SIGUSR1
STACK_WAIT_S = 2.0
TAIL_LINES = 20
TIMEOUT_TAIL_LINES = 120  # room for the stacks


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
    output: str = ""  # a trial that did not end ok: all it printed (stderr, then stdout)


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
        fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        environ = (proc / "environ").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return None
    rank = next(
        (int(v.split(b"=", 1)[1]) for v in environ for p in RANK_VARS if v.startswith(p)), None
    )
    cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
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


def parse_result(stdout: str) -> dict | None:
    """The benchmark's record: the last stdout line that is a kit.bench JSON object."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("schema") == benches.SCHEMA:
                return record
    return None


def marked(marker: str) -> list[int]:
    """Pids (readable by us) whose environment carries KIT_TRIAL=marker."""
    needle = f"KIT_TRIAL={marker}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


# Mount daemons that Apptainer starts and must stop itself (see Tree.stop_orphaned_mounts).
MOUNT_DAEMONS = frozenset({"squashfuse", "squashfuse_ll"})
ORPHAN_GRACE_S = 5.0  # Apptainer's own clean-up waits 1 s for the daemon, then ends it


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of pid, or None once it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else (int(fields[1]), fields[19])


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


class Tree(threading.Thread):
    """Remembers every process that descends from root while the trial runs (and, when
    asked, which MPI library its ranks load: a user's command does not say)."""

    def __init__(self, root: int, every_s: float = 0.25, marker: str = "") -> None:
        super().__init__(daemon=True)
        self.root, self.every_s, self.marker = root, every_s, marker
        self.mpi_loaded: set[str] = set()
        self.seen: dict[int, str] = {}  # pid -> start time (guards against pid reuse)
        self.parent: dict[int, tuple[int, str | None]] = {}  # pid -> its parent when first seen
        self.orphaned: dict[int, float] = {}  # mount daemon -> when its parent was found gone
        self.stopped: set[int] = set()
        self.root_start = st[1] if (st := _stat(root)) else None
        self.done = threading.Event()

    def scan(self) -> None:
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (st := _stat(int(entry.name))):
                children.setdefault(st[0], []).append(int(entry.name))
        todo = [self.root, *self.seen]
        while todo:
            parent = todo.pop()
            for child in children.get(parent, []):
                if child not in self.seen and (st := _stat(child)):
                    self.seen[child] = st[1]
                    self.parent[child] = (parent, self.seen.get(parent, self.root_start))
                    todo.append(child)

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
            if self.marker and not self.mpi_loaded:  # ranks in a container: by their marker
                self.mpi_loaded = mapped_mpi([*self.alive(), *marked(self.marker)])

    def alive(self) -> list[int]:
        return [pid for pid, start in self.seen.items() if (st := _stat(pid)) and st[1] == start]


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
    read: Callable[[str], dict | str | None] | None = None,
    watch_mpi: bool = False,
) -> Outcome:
    """Run argv to completion, timeout or Ctrl-C. Output goes to files, not pipes, so the
    end of the launcher, not the end of every inherited descriptor, ends the wait. The
    result is read from the whole standard output (read: a user's command's own reader;
    by default the kit benchmark's record)."""
    env = {**env, "KIT_TRIAL": marker}
    kills_before = oom_kills()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            argv,
            env=env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        tree = Tree(proc.pid, marker=marker if watch_mpi else "")
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
            stop(proc, tree, marker)
            cleanup()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    result, unread = read_result(read, stdout)
    if status is None:
        status = "ok" if proc.returncode == 0 and result is not None else "failed"
    lines = TIMEOUT_TAIL_LINES if status == "timeout" else TAIL_LINES
    tail = "\n".join((stderr + stdout).strip().splitlines()[-lines:])
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
    return Outcome(status, proc.returncode, wall, result, tail, stuck, why, oom, loaded, whole)


def read_result(
    read: Callable[[str], dict | str | None] | None, stdout: str
) -> tuple[dict | None, str]:
    """The result in a trial's output (read: a user's command's reader, else the kit
    benchmark's record), or None and why (the reader's own words)."""
    got = (read or parse_result)(stdout)
    return (None, got) if isinstance(got, str) else (got, "")
