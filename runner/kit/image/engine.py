"""The Docker engine, driven through its command-line client."""

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator
from functools import cache

from kit.core import inputs, settings
from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.proc import capture

log = logger(__name__)


@cache
def docker() -> str:
    """The docker client to use: KIT_DOCKER, else the first on PATH that can run BuildKit.

    Clients from 23.0 on hand BuildKit builds to the buildx plugin and fail without
    it; older clients (Debian's 20.10) carry BuildKit built in. Build secrets need it.
    """
    if client := settings.value("KIT_DOCKER"):
        return client
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    found = [p for d in dirs if os.access(p := os.path.join(d, "docker"), os.X_OK)]
    for client in found:
        if _has_buildkit(client):
            return client
    return found[0] if found else "docker"


def _has_buildkit(client: str) -> bool:
    if subprocess.run([client, "buildx", "version"], capture_output=True).returncode == 0:
        return True
    out = subprocess.run([client, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)\.", out)
    return m is not None and int(m.group(1)) < 23


def _run(args: list[str], timeout: float | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([docker(), *args], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise KitError(
            f"no docker client '{docker()}' on PATH; install docker.io or run ci/provision"
        ) from None
    except OSError as e:
        raise KitError(
            f"docker client '{docker()}' cannot be run ({e.strerror}); "
            "set KIT_DOCKER to a working docker client"
        ) from None


def server_version() -> str:
    """The engine's version, or a KitError saying how to start one."""
    try:
        p = _run(["version", "--format", "{{.Server.Version}}"], timeout=30)
    except subprocess.TimeoutExpired:
        raise KitError("the Docker engine did not answer within 30 s") from None
    if p.returncode != 0 or not p.stdout.strip():
        raise KitError(
            "no Docker engine answers; start dockerd (as root: ci/provision) "
            "or join the 'docker' group"
        )
    version = p.stdout.strip()
    if not re.fullmatch(r"\d+\.\d+[\w.+~-]*", version):
        raise KitError(
            f"'{docker()} version' answered {version.splitlines()[0][:120]!r}, not an engine's "
            "version; set KIT_DOCKER to a working docker client"
        )
    return version


def answers() -> bool:
    """Whether an engine answers here (a dead one: kit falls back to what it cached)."""
    try:
        server_version()
    except KitError:
        return False
    return True


def inspect(ref: str) -> dict | None:
    """`docker image inspect` of ref, or None when there is no such image. A client that
    answers something else than an inspection is named with what it said."""
    p = _run(["image", "inspect", ref])
    if p.returncode != 0:
        if "no such image" in p.stderr.lower():
            return None
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        raise KitError(f"the Docker engine did not answer ({tail}); start dockerd or ci/provision")
    try:
        info = inputs.loads(p.stdout, "docker image inspect", "")[0]
    except (inputs.Unreadable, IndexError, KeyError, TypeError):
        info = None
    if not (isinstance(info, dict) and isinstance(info.get("Id"), str)):
        said = (p.stdout.strip().splitlines() or ["nothing"])[0][:120]
        raise KitError(
            f"'{docker()} image inspect {ref}' answered {said!r}, not an image's inspection; "
            "set KIT_DOCKER to a working docker client"
        )
    return info


def found(ref: str) -> dict | None:
    """ref's inspection when an engine answers here and holds it, else None; never raises
    (for fallbacks: a pulled SIF, wheels compiled on the host)."""
    try:
        return inspect(ref)
    except KitError:
        return None


IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")


def image_ids() -> set[str] | None:
    """Every image id the engine holds (untagged ones too), or None when no engine answers
    as one: what cannot be known must not count as gone (the cache removes by it)."""
    try:
        p = _run(["image", "ls", "--all", "--no-trunc", "--quiet"], timeout=60)
    except (KitError, subprocess.TimeoutExpired):
        return None
    ids = set(p.stdout.split())
    if p.returncode != 0 or not all(IMAGE_ID.fullmatch(i) for i in ids):
        return None
    return ids


def image_id(ref: str) -> str:
    """The image's content digest (sha256:...), the key every cached conversion is filed under."""
    info = inspect(ref)
    if info is None:
        raise KitError(f"no image '{ref}' in the Docker engine; build it first: kit build")
    return info["Id"]


def run_quiet(args: list[str], what: str) -> str:
    return capture([docker(), *args], what)


def remove_quiet(ref: str) -> None:
    """Remove an image kit made on the way (a build's raw output, a rebuild compared):
    best effort, as one a container still uses is not in the way."""
    p = _run(["rmi", ref])
    if p.returncode != 0:
        log.debug(f"docker rmi {ref}: {p.stderr.strip()}")


@contextlib.contextmanager
def created(tag: str, purpose: str) -> Iterator[str]:
    """A stopped container of tag (named kit-PURPOSE-PID), to export or copy files from;
    removed afterwards whatever happens."""
    name = f"kit-{purpose}-{os.getpid()}"
    run_quiet(["create", "--name", name, tag], "docker create")
    try:
        yield name
    finally:
        subprocess.run([docker(), "rm", "-f", name], capture_output=True)
