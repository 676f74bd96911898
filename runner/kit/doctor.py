"""`kit doctor`: what this host has for each runtime, and how to get what is missing.

The rows are the components runtimes share, then each registered runtime's own
command as it declares it; what a runtime needs is its declaration, not a table here.
"""

import dataclasses
import getpass
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from kit.core import columns, settings
from kit.core.errors import KitError
from kit.core.paths import cache_dir, size_of
from kit.core.proc import version_line
from kit.image import engine
from kit.image.cache import images_dir
from kit.image.debian_base import base_tag
from kit.image.recipes import FLAVOURS
from kit.runtimes import RUNTIMES, Runtime, gpu


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str


def _tool(
    name: str, cmd: list[str], fix: str, pick: Callable[[str], str] = str, wait: float = 60
) -> Check:
    if shutil.which(cmd[0]) is None:
        return Check(name, False, f"'{cmd[0]}' not on PATH", fix)
    env = {**os.environ, "USER": os.environ.get("USER") or getpass.getuser()}  # ch-run wants it
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=wait)
    except subprocess.TimeoutExpired:
        return Check(name, False, f"'{cmd[0]}' gave no answer within {wait:g} s", fix)
    except OSError as e:
        return Check(name, False, f"'{cmd[0]}' cannot be run ({e.strerror or e})", fix)
    text = (p.stdout + p.stderr).strip()
    return Check(name, p.returncode == 0, pick(text) if text else "no output", fix)


def _engine() -> Check:
    fix = "as root: ci/provision (installs docker.io, starts dockerd)"
    try:
        return Check("docker engine", True, f"{engine.server_version()} via {engine.docker()}", fix)
    except KitError as e:
        return Check("docker engine", False, str(e), fix)


def _base() -> Check:
    tag = base_tag("bookworm")
    try:
        present = engine.inspect(tag) is not None
    except (OSError, KitError):
        present = False
    return Check("base image", present, tag if present else f"{tag} missing", "as root: kit base")


def _fuse() -> Check:
    usable = os.access("/dev/fuse", os.R_OK | os.W_OK)
    return Check(
        "/dev/fuse",
        usable,
        "usable" if usable else "not usable by this user",
        "as root: chmod 666 /dev/fuse (squashfuse mounts of SIF and squashfs)",
    )


SLURM_WAIT_S = 8  # sinfo retries a controller that is down for ~50 s; doctor says so sooner


def components() -> dict[str, Check]:
    """What runtimes share: the engine, the base image, FUSE, squashfs tools, MPI, Slurm."""
    mpich, ompi = FLAVOURS["mpich"], FLAVOURS["openmpi"]
    return {
        "engine": _engine(),
        "base": _base(),
        "fuse": _fuse(),
        "squashfs": _tool(
            "squashfs-tools-ng",
            ["tar2sqfs", "--version"],
            "apt-get install squashfs-tools-ng (kit convert packs squashfs and SIF with it)",
            first_line,
        ),
        "mpich": _tool(
            "MPICH",
            [mpich.mpirun, "--version"],
            f"apt-get install {' '.join(mpich.packages)}",
            version_line,
        ),
        "openmpi": _tool(
            "Open MPI",
            [ompi.mpirun, "--version"],
            f"apt-get install {' '.join(ompi.packages)}",
            first_line,
        ),
        "slurm": _tool(
            "Slurm (--launcher slurm)",
            ["sinfo", "-h", "-o", "%P %a %D nodes %T"],
            "a site's Slurm client; here ci/provision starts a two-node test cluster",
            lambda t: " / ".join(t.splitlines()),
            wait=SLURM_WAIT_S,
        ),
    }


def first_line(text: str) -> str:
    return text.splitlines()[0]


def tools() -> dict[str, Check]:
    """Each runtime's own command, as the runtime declares it (one row per command): the
    very client kit calls (Runtime.client; Docker's need not be PATH's first), its
    version and where it is."""
    users: dict[str, list[type[Runtime]]] = {}
    for cls in RUNTIMES.values():
        users.setdefault(cls.tool, []).append(cls)

    def label(tool: str, names: list[str]) -> str:
        return tool if names == [tool] else f"{', '.join(names)} ({tool})"

    def check(tool: str, classes: list[type[Runtime]]) -> Check:
        client = classes[0].client()
        where = shutil.which(client) or client
        argv = [client, *classes[0].version_argv]
        said = _tool(label(tool, [c.name for c in classes]), argv, classes[0].fix, first_line)
        return dataclasses.replace(said, detail=f"{said.detail} ({where})") if said.ok else said

    return {f"tool:{tool}": check(tool, classes) for tool, classes in users.items()}


def needs(name: str) -> tuple[str, ...]:
    """The rows a runtime needs: its declared components and its own command."""
    cls = RUNTIMES[name]
    return (*cls.needs, f"tool:{cls.tool}")


def gpus(runtimes: list[str]) -> list[str]:
    """The host's GPUs, then how each runtime (those named, else all) passes them in and
    what it lacks for that here: what a cuda variant's campaign needs, shown below the
    CPU rows, whose status it does not change."""
    found, why = gpu.devices()
    lines = [
        f"GPU {d.index}: {d.name}, driver {d.driver}, compute capability {d.compute}" for d in found
    ] or [f"GPU: none ({why}); --variant cuda trials cannot run on this host"]
    rows = [("GPUS VIA", "OPTION", "STATUS")]
    for name in runtimes or list(RUNTIMES):
        access = RUNTIMES[name].gpu
        lacks = access.missing()
        how = " ".join(access.options) or "-"
        rows.append((name, how, f"{'MISSING ' if lacks else 'OK'}{', '.join(lacks)}"))
        if lacks:
            rows.append(("", f"needs: {access.needs}"))
    return lines + columns.aligned(rows)


LOW_DISK_GB = 10  # a campaign's conversions: a few GB for each image it runs


def disk() -> str:
    """Free space where kit keeps its conversions and environments, and what the cache
    already holds there (its converted images apart: what kit cache prune removes): disks
    fill with images, so say it before a campaign does."""
    cache = cache_dir()
    where = next(p for p in (cache, *cache.parents) if p.exists())
    free = shutil.disk_usage(where).free / 1e9
    held, images = size_of(cache) / 1e9, size_of(images_dir()) / 1e9
    line = (
        f"disk: {free:.0f} GB free under {cache} (the cache holds {held:.1f} GB, converted "
        f"images {images:.1f} GB of it: kit cache ls)"
    )
    if free < LOW_DISK_GB:
        line += (
            f"; under {LOW_DISK_GB} GB: each image a campaign runs is converted there (a few "
            "GB each), so free space (kit cache prune) or set KIT_CACHE to a larger disk"
        )
    return line


@dataclass(frozen=True)
class Found:
    """What kit doctor found: each row (components, then each runtime's command, by key),
    the GPU lines, the disk line, the settings line, and the rows the named runtimes need
    that are missing (kit doctor --json prints it as it is)."""

    checks: dict[str, Check]
    gpus: list[str]
    disk: str
    settings: str
    root: bool
    missing: list[str]

    @property
    def ok(self) -> bool:
        return not self.missing


def examine(runtimes: list[str]) -> Found:
    """Everything kit doctor checks, for the runtimes named (none: only what is there)."""
    found = {**components(), **tools()}
    missing = sorted({k for rt in runtimes for k in needs(rt) if not found[k].ok})
    return Found(found, gpus(runtimes), disk(), settings.said(), os.geteuid() == 0, missing)


def text(f: Found, runtimes: list[str]) -> str:
    """kit doctor's table: a row a check, with its fix when missing, then the rest."""
    rows = [("COMPONENT", "STATUS", "DETAIL")]
    for c in f.checks.values():
        rows.append((c.name, "OK" if c.ok else "MISSING", c.detail))
        if not c.ok:
            rows.append(("", "", f"fix: {c.fix}"))
    lines = [*columns.aligned(rows), *f.gpus, f.disk, f.settings]
    if f.root:
        lines.append(
            "note: running as root; Apptainer and MPI jobs here must run as an "
            "ordinary user (root lacks CAP_SYS_RESOURCE)"
        )
    if f.missing:
        lines.append(
            f"missing for {', '.join(runtimes)}: " + ", ".join(f.checks[k].name for k in f.missing)
        )
    return "\n".join(lines)
