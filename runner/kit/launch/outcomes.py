"""How a trial ended, as its record files it: the Outcome, ok or failed by its exit and its
result, the tail of what it printed, and, when a signal ended a rank, which one and why
(the kernel's OOM killer, counted on this host). A local trial's and a Slurm job's
outcomes are judged by the same rules here (kit.launch.supervise, kit.launch.slurm).
"""

import re
import signal
from dataclasses import dataclass
from pathlib import Path

from kit.launch import hostload

TAIL_LINES = 20
TIMEOUT_TAIL_LINES = 120  # room for the stacks (supervise.ask_for_stacks)
TAIL_CHARS = 32 << 10  # the record's output_tail, at most (its last lines may be long)


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
    # the last streams.TAIL_BYTES of each, headed by how many bytes were cut
    # watched: the machine's CPU time and the trial's own (window.own_s), over the same
    # instants (proctree.Tree); None where nothing here watched it (a Slurm job)
    window: hostload.Window | None = None
    # a user's command's first rank's launch fingerprint, read from here while it ran
    # (rank_fingerprint); None where none was taken
    fingerprint: dict | None = None


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The record's output_tail: the last lines of what a trial printed, TAIL_CHARS at most."""
    return "\n".join(text.strip().splitlines()[-lines:])[-TAIL_CHARS:]


# What benchmarks/kitbench.py prints when a rank leaves MPI_Finalize after its watchdog
# (MPICH 4.0: rarely, both ranks spin in MPI_Finalize after the final barrier).
LEFT_UNFINALIZED = "kitbench: MPI_Finalize did not return"


def ended_ok(returncode: int | None, result: dict | None, stderr: str) -> bool:
    """A trial that printed its result ended well: with exit status 0, or with a rank that
    left MPI_Finalize after everything was measured and printed (MPICH's launcher then ends
    the job's other ranks with SIGKILL, and exits non-zero)."""
    return result is not None and (returncode == 0 or LEFT_UNFINALIZED in stderr)


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
