"""Host lists without a scheduler (kit run --hosts, --hostfile): the nodes a cloud or a
lab gives without a batch system, reached over ssh by the MPI flavour's own launcher.

Everything that can be checked host by host is checked before the first trial, each
failure one line with its fix: the host answers over ssh with this user's key and a
known host key, and holds what the trial runs (the same image conversion, native
environment or engine image, compared by what names its digest: a file, an image id).
"""

import contextlib
import ipaddress
import re
import shlex
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from kit.core import inputs, schema
from kit.core.errors import KitError

if TYPE_CHECKING:
    from kit.runtimes.base import Leftovers

HOSTS_LABEL = "mpirun over ssh"  # the launcher field of a --hosts trial
SSH = ("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def parse(hosts: str | None, hostfile: Path | None) -> tuple[str, ...]:
    """The host list of --hosts A,B or --hostfile FILE (one host a line, '#' comments; a
    slot count after the name, MPICH's host:N or Open MPI's host slots=N, is ignored:
    kit places one rank per host in turn). An IPv6 address is refused (_ipv6)."""
    if hosts is not None and hostfile is not None:
        raise KitError("give --hosts or --hostfile, not both")
    if hostfile is not None:
        fix = "give a text file of host names, one a line"
        lines = inputs.read_text(hostfile, f"--hostfile {hostfile}", fix).splitlines()
        words = [w[0] for ln in lines if (w := ln.split("#")[0].split())]
        where = f"--hostfile {hostfile}"
        _ipv6(where, words)  # before the slot count is cut off at its ':'
        names = [w.split(":")[0] for w in words]
    elif hosts is not None:
        names = [h.strip() for h in hosts.split(",") if h.strip()]
        where = f"--hosts '{hosts}'"
        _ipv6(where, names)
    else:
        return ()
    if not names:
        raise KitError(f"{where} names no host; give host names or addresses, e.g. n1,n2")
    for h in names:
        if not NAME.fullmatch(h):
            raise KitError(f"{where}: '{schema.printable(h)}' is not a host name or address")
    if len(set(names)) != len(names):
        raise KitError(f"{where} names a host twice; kit places one rank per host in turn")
    return tuple(names)


def _ipv6(where: str, words: list[str]) -> None:
    """Refuse an IPv6 address ([fe80::1]:2, fe80::1, ::1) in a host list: the launchers'
    host lists (Hydra's -hosts, Open MPI's -H) read a ':' as the start of a slot count, so
    fe80::1 would reach mpirun as a host named fe80 (kit itself cut a --hostfile's so), and
    the route kit offers the ranks (_route, subnet) is IPv4's."""
    for word in words:
        bare = word[1:].partition("]")[0] if word.startswith("[") else word
        try:
            ipaddress.IPv6Address(bare)
        except ValueError:
            continue
        raise KitError(
            f"{where}: '{schema.printable(word)}' is an IPv6 address, which mpirun's host "
            "list cannot carry (a ':' there starts a slot count); give the host's name "
            "(one /etc/hosts or DNS gives it)"
        )


def _ssh(host: str, *argv: str) -> subprocess.CompletedProcess:
    """argv on host over ssh, without a prompt (each word quoted: ssh hands the remote
    shell one line); a KitError when ssh cannot be run or the host does not answer."""
    try:
        remote = map(shlex.quote, argv)
        return subprocess.run([*SSH, host, *remote], capture_output=True, timeout=60)
    except FileNotFoundError:
        raise KitError("--hosts starts ranks over ssh: install openssh-client") from None
    except subprocess.TimeoutExpired:
        raise KitError(f"host '{host}' did not answer ssh in 60 s; check that it is up") from None


def reach(host: str) -> None:
    """Raise a KitError naming the fix unless `ssh host` works without a prompt."""
    p = _ssh(host, "true")
    if p.returncode == 0:
        return
    stderr = p.stderr.decode(errors="replace")
    said = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    last = said[-1] if said else f"ssh exited {p.returncode}"
    if "Host key verification failed" in stderr:
        raise KitError(
            f"host '{host}': ssh does not accept its host key ({last}); check the key it "
            f"offers, then add it to ~/.ssh/known_hosts (ssh-keyscan {host})"
        )
    if "Permission denied" in stderr:
        raise KitError(
            f"host '{host}' refused this user's ssh key ({last}); kit needs ssh without a "
            "password: add your public key to ~/.ssh/authorized_keys there"
        )
    raise KitError(
        f"host '{host}' cannot be reached over ssh ({last}); check its name and that sshd "
        "runs there"
    )


def answer(argv: list[str]) -> bytes | None:
    """What argv prints here (None when it fails): what each host must print alike."""
    p = subprocess.run(argv, capture_output=True)
    return p.stdout if p.returncode == 0 else None


def holds(host: str, identity: list[str], here: bytes | None) -> bool:
    """Whether host prints `here`, this host's answer (see answer), for the command
    `identity` (a small file naming a digest, an engine's image id)."""
    there = _ssh(host, *identity)
    return here is not None and there.returncode == 0 and there.stdout == here


def make_dirs(host: str, dirs: tuple[str, ...]) -> None:
    """Make on host the folders a runtime's ranks need there (a KitError when it cannot)."""
    if not dirs:
        return
    p = _ssh(host, "mkdir", "-p", *dirs)
    if p.returncode != 0:
        said = p.stderr.decode(errors="replace").strip().splitlines()
        raise KitError(
            f"host '{host}': cannot make {', '.join(dirs)} ({said[-1] if said else 'mkdir failed'})"
            "; make it writable there, or share the folder with the nodes"
        )


def clear(names: tuple[str, ...], left: "Leftovers") -> None:
    """Remove on every host what a trial left there (failures ignored: clean-up)."""
    for host in names:
        with contextlib.suppress(KitError):
            ids = _ssh(host, *left.find).stdout.decode().split()
            if ids:
                _ssh(host, *left.remove, *ids)


def engines(names: tuple[str, ...], argv: tuple[str, ...]) -> dict[str, str]:
    """What `argv` (an engine's id) prints on each host ("" where it fails)."""
    out = {}
    for host in names:
        p = _ssh(host, *argv)
        out[host] = p.stdout.decode().strip() if p.returncode == 0 else ""
    return out


def interface(host: str) -> str:
    """The local network interface that routes to host ("" for this host itself): MPI's
    launcher must offer the nodes an address they can reach on it, which the host name
    of a multi-homed login node need not resolve to (Hydra's -iface: a local name)."""
    return _route(host, "dev")


def source(host: str) -> str:
    """This host's address on the route to host ("" for this host itself)."""
    return _route(host, "src")


def _route(host: str, field: str) -> str:
    """A field of the kernel's route to host (`ip route get`), "" for a local one."""
    try:
        addr = socket.gethostbyname(host)
    except OSError:
        return ""
    if ipaddress.ip_address(addr).is_loopback:
        return ""
    try:
        p = subprocess.run(["ip", "-o", "route", "get", addr], capture_output=True, text=True)
    except FileNotFoundError:
        return ""
    if re.search(r"\bdev lo\b", p.stdout):
        return ""
    found = re.search(rf"\b{field} (\S+)", p.stdout)
    return found.group(1) if found else ""


def subnet(iface: str) -> str:
    """The IPv4 network of a local interface, e.g. 10.77.0.0/24 ("" when it has none):
    Open MPI applies its interface options on every node, where the same network may
    have another interface name."""
    if not iface:
        return ""
    try:
        p = subprocess.run(
            ["ip", "-o", "-4", "addr", "show", "dev", iface], capture_output=True, text=True
        )
    except FileNotFoundError:
        return ""
    found = re.search(r"\binet (\S+)", p.stdout)
    return str(ipaddress.ip_interface(found.group(1)).network) if found else ""


def launcher_argv(
    flavour: str,
    mpirun: str,
    hosts: tuple[str, ...],
    ranks: int,
    route: tuple[str, str],
    env: list[str],
    pmi_port_via: str | None = None,
    daemon_env: tuple[tuple[str, str], ...] = (),
) -> list[str]:
    """The flavour's launcher over ssh: one rank per host in turn; the connections on the
    route to the hosts (interface here, its network: see interface and subnet); env: the
    variables the ranks must get (Hydra passes them all anyway). pmi_port_via: Hydra's
    proxies give ranks a TCP port to reach them on, not an inherited socket (which a rank
    started by a container engine's client does not get); the proxies then apply -iface
    themselves, so this host's address on the route (see source) names it instead.
    daemon_env: what Open MPI's daemon on each host must have too (its PMIx server reads
    PMIx's settings from its own environment, which ssh does not carry there)."""
    iface, net = route
    if flavour == "mpich":
        on = ["-iface", iface] if iface else []
        if pmi_port_via is not None:
            on = [*(["-localhost", pmi_port_via] if pmi_port_via else []), "-pmi-port"]
        return [mpirun, "-launcher", "ssh", "-hosts", ",".join(hosts), *on, "-np", str(ranks)]
    on = []
    if net:
        on = ["--mca", "oob_tcp_if_include", net, "--mca", "btl_tcp_if_include", net]
    exported = [x for k in env for x in ("-x", k)]
    if daemon_env:
        agent = " ".join(["env", *(f"{k}={v}" for k, v in daemon_env), "orted"])
        on += ["--mca", "orte_launch_agent", agent]
    spread = ["--map-by", "node", "--oversubscribe"]  # more ranks than hosts: round again
    return [mpirun, "-H", ",".join(hosts), *spread, *on, *exported, "-np", str(ranks)]
