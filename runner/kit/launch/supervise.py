"""One trial, run to its end: its command started in a session of its own, watched while it
runs, stopped with everything it started at its end, timeout or Ctrl-C, and judged.

The launcher runs in a new session so a Ctrl-C or a timeout can stop the whole process
group (mpirun and every rank), not only the launcher. Helpers leave that group, so the
trial's processes are watched while it runs (proctree) and every process ever seen in its
tree is stopped at the end, as is any process carrying the trial's KIT_TRIAL marker (a
child that escaped between two looks). What lives outside this tree entirely (a Docker
container) is removed by the runtime's own clean-up. The same looks count the CPU time of
the trial's processes beside the machine's (hostload), stop a mount daemon its Apptainer
left behind (mounts) and, when asked, find which MPI library its ranks loaded. A user's
command's first rank is fingerprinted from here when its figure is first read
(rank_fingerprint).
"""

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from kit.core.log import logger
from kit.core.readers import BenchRecord, Reader, read_result
from kit.launch import mounts, outcomes, proctree, rank_fingerprint, streams

GRACE_S = 5.0
LOOK_S = 0.25  # how often the watch looks at the trial's processes
# On a timeout each stuck Python rank is asked for its threads' stacks (benchmarks/kitbench.py
# registers faulthandler on this signal), so the record says where it hung, not only that it did.
STACK_SIGNAL = signal.SIGUSR1
STACK_WAIT_S = 10.0  # at most: a loaded host may take seconds to schedule a rank's handler
STACK_QUIET_S = 0.5  # stderr silent this long after the stacks began: they are all there

log = logger(__name__)


class Watch(threading.Thread):
    """The looks at a running trial, every LOOK_S: its processes and their CPU (the tree),
    a mount daemon its Apptainer left (mounts), and, when asked, the MPI library files its
    ranks mapped (a user's command does not say which MPI it loads)."""

    def __init__(self, tree: proctree.Tree, watch_mpi: bool) -> None:
        super().__init__(daemon=True)
        self.tree, self.watch_mpi = tree, watch_mpi
        self.orphans = mounts.Orphans()
        self.mpi_loaded: set[str] = set()
        self.done = threading.Event()

    def run(self) -> None:
        tree = self.tree
        while not self.done.wait(LOOK_S):
            tree.scan()
            self.orphans.stop(tree)
            if self.watch_mpi and not self.mpi_loaded:  # ranks in a container: by their marker
                self.mpi_loaded = proctree.mapped_mpi(tree.processes())


def still_running(tree: proctree.Tree, marker: str) -> tuple[dict, ...]:
    """What a timed-out trial was still doing: ranks (in rank order), then their launchers;
    marked processes count too (ranks inside a Docker container are outside the tree)."""
    tree.scan()
    pids = {tree.root, *tree.alive(), *proctree.marked(marker)}
    found = [d for pid in pids if (d := proctree.describe(pid))]
    found.sort(key=lambda d: (d["rank"] is None, d["rank"] or 0, d["pid"]))
    return tuple(found)


def ask_for_stacks(stuck: tuple[dict, ...], err: streams.Capture) -> None:
    """Signal every stuck Python rank to print its stacks on stderr, then wait until they
    have (stderr grew, then fell silent), not for a fixed time a loaded host can outlast."""
    pids = [d["pid"] for d in stuck if d["rank"] is not None and "python" in d["command"]]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, STACK_SIGNAL)
    if not pids:
        return
    before, deadline = err.total, time.monotonic() + STACK_WAIT_S
    seen, since = before, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if err.total != seen:
            seen, since = err.total, time.monotonic()
        elif seen != before and time.monotonic() - since >= STACK_QUIET_S:
            return


def _signal_all(pgid: int, pids: list[int], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop(proc: subprocess.Popen, tree: proctree.Tree, marker: str) -> None:
    """SIGTERM the group and every tracked or marked process, then SIGKILL what remains."""
    tree.scan()

    def left() -> list[int]:
        return sorted(set(tree.alive()) | set(proctree.marked(marker)))

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
    program: list[str] | None = None,
    helpers: tuple[str, ...] = (),
) -> outcomes.Outcome:
    """Run argv to completion, timeout or Ctrl-C. The result is read from all of its
    standard output as it is printed (read: makes a user's command's reader; by default
    the kit benchmark's record), and only the tail of each stream is kept (streams).
    program: a user's command, whose first rank is fingerprinted once its result is read.
    helpers: the names of the runtime's helper processes (Runtime.helpers), whose CPU the
    watch counts as the runtime's.

    Each stream is a pipe with a thread of its own reading it (streams.pump), never waited
    on: the end of the launcher, not the end of every inherited descriptor, ends the wait,
    and once the tree is stopped each reader takes what its pipe still holds and ends. The
    reading costs kit CPU time beside the trial in proportion to what it prints (nothing
    to speak of for a benchmark's few lines)."""
    env = {**env, "KIT_TRIAL": marker}
    kills_before = outcomes.oom_kills()
    reader = (read or BenchRecord)()
    stopped = threading.Event()
    t0 = time.monotonic()
    with subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    ) as proc:  # its end closes the pipes
        tree = proctree.Tree(proc.pid, marker=marker, helpers=helpers)
        first = rank_fingerprint.FirstFigure(reader, tree, program) if program else None
        out, err = streams.Capture(first or reader), streams.Capture()
        pumps = [
            threading.Thread(target=streams.pump, args=(pipe, capture, stopped), daemon=True)
            for pipe, capture in ((proc.stdout, out), (proc.stderr, err))
        ]
        for pump in pumps:
            pump.start()
        watch = Watch(tree, watch_mpi)
        watch.start()
        status, stuck = None, ()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status, stuck = "timeout", still_running(tree, marker)
            ranks = sorted({d["rank"] for d in stuck if d["rank"] is not None})
            log.info(
                f"kit: trial {marker} timed out after {timeout:g} s; still running: "
                + (f"ranks {', '.join(map(str, ranks))}" if ranks else f"{len(stuck)} processes")
                + "; stopping it"
            )
            ask_for_stacks(stuck, err)
        except KeyboardInterrupt:
            status = "interrupted"
        finally:
            wall = time.monotonic() - t0
            try:
                watch.done.set()
                stop(proc, tree, marker)
                cleanup()
            finally:  # the readers end before the pipes close, whatever happened
                stopped.set()
                for pump in pumps:
                    pump.join()
    stdout, stderr = out.text(), err.text()
    printed = stderr + stdout
    result, unread = read_result(reader)
    if status is None:
        status = "ok" if outcomes.ended_ok(proc.returncode, result, stderr) else "failed"
    lines = outcomes.TIMEOUT_TAIL_LINES if status == "timeout" else outcomes.TAIL_LINES
    tail = outcomes.tail(printed, lines)
    why, oom = "", False
    if status == "failed":
        kills_after = outcomes.oom_kills()
        kills = 0 if kills_before is None or kills_after is None else kills_after - kills_before
        why = outcomes.cause(proc.returncode, printed, kills)
        oom = kills > 0 and outcomes.ending_signal(proc.returncode, printed) == signal.SIGKILL
        if not why and proc.returncode == 0:
            why = unread
    loaded = tuple(sorted(watch.mpi_loaded))
    whole = "" if status == "ok" else f"== stderr ==\n{stderr}\n== stdout ==\n{stdout}"
    fingerprint = first.fingerprint if first else None
    return outcomes.Outcome(
        status, proc.returncode, wall, result, tail, stuck, why, oom, loaded, whole, tree.window,
        fingerprint,
    )  # fmt: skip
