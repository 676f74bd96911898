"""Before a resumed campaign's first trial: end what its killed run left running.

A campaign killed with kill -9 cannot stop its last trial: the ranks (in a session of
their own), Apptainer's mount daemons and the trial's container live on, loading the
host the resumed campaign measures on, and a container keeps the trial's name, which
the trial run again needs. Every process of a trial carries KIT_TRIAL=kit-CAMPAIGN-I
in its environment (kit.launch.supervise) and its container is named so (Docker's and
Podman's runtimes), so both are found by the campaign's id. The results folder's lock
(kit.results.runlock.held) is held first: no live run of the campaign owns them.
"""

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time

from kit.core.errors import KitError
from kit.core.log import logger
from kit.launch import proctree, supervise
from kit.runtimes import RUNTIMES

CONTAINER_ENGINES = ("docker", "podman")  # runtimes whose trials run in a named container

log = logger(__name__)


def _trial(campaign: str) -> re.Pattern[str]:
    """A trial's name (run.trial: kit-CAMPAIGN-I) in this campaign."""
    return re.compile(rf"kit-{re.escape(campaign)}-\d+")


def processes(campaign: str) -> list[int]:
    """This user's processes whose environment carries a trial marker of the campaign."""
    mine = os.getuid()
    return sorted(pid for pid in proctree.marked(_trial(campaign)) if _owner(pid) == mine)


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:  # gone meanwhile
        return None


def engines() -> list[str]:
    """The container engines' clients on this host, as their runtimes call them."""
    clients = (RUNTIMES[name].client() for name in CONTAINER_ENGINES)
    return [client for client in clients if shutil.which(client)]


def containers(client: str, campaign: str) -> list[str]:
    """The campaign's trial containers the engine holds, running or not ([] when it does
    not answer: then it runs none)."""
    argv = [client, "ps", "--all", "--filter", f"name=kit-{campaign}-", "--format", "{{.Names}}"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    trial = _trial(campaign)
    return [n for n in p.stdout.split() if trial.fullmatch(n)] if p.returncode == 0 else []


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _gone(campaign: str, within_s: float) -> list[int]:
    """The campaign's processes still running after waiting up to within_s for them to end."""
    deadline = time.monotonic() + within_s
    while (left := processes(campaign)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def end(campaign: str, grace_s: float = supervise.GRACE_S) -> None:
    """End the processes and containers a killed run of the campaign left: containers
    removed, processes sent SIGTERM, then SIGKILL after grace_s; said in one line. A
    KitError naming those that cannot be ended: trials beside them would measure a
    loaded host, and a container left keeps the name its trial runs again under."""
    removed, kept = 0, []
    for client in engines():
        if names := containers(client, campaign):
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):  # left: named below
                subprocess.run([client, "rm", "--force", *names], capture_output=True, timeout=120)
            left = containers(client, campaign)
            removed += len(set(names) - set(left))
            kept += [f"{n} ({client} rm --force {n})" for n in left]
    found = processes(campaign)
    _signal(found, signal.SIGTERM)
    _signal(_gone(campaign, grace_s), signal.SIGKILL)
    if (left := _gone(campaign, grace_s)) or kept:
        pids = [f"PIDs {', '.join(map(str, left))} (kill -9 PID, as their owner)"] if left else []
        raise KitError(
            f"campaign {campaign}'s trials from its killed run cannot be ended: "
            f"{'; '.join(pids + kept)}; end them, then resume again"
        )
    if found or removed:
        log.info(
            f"kit: campaign {campaign}: stopped {_count(len(found), 'process', 'processes')} "
            f"and removed {_count(removed, 'container', 'containers')} left running by its "
            "killed run"
        )


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"
