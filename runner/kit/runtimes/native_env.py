"""The native environment: the host's python and MPI with the image's own pins.

Same software natively and in the container is what makes an overhead figure
mean anything, so the host's apt packages must match the recipe's pins exactly
and the pip pins are built the same way (MPI packages from source with the
flavour's mpicc) into a venv over the system site packages. What the image's
builder stage compiled (Horovod) is installed from the image's own wheels when
the image is here: the very same binaries, and minutes saved; else it is
compiled on the host with the same pins.
"""

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from kit.core import inputs
from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.paths import cache_dir, exclusive, write_atomically
from kit.core.proc import stream
from kit.image import engine
from kit.image import wheels as host_wheels
from kit.image.blocks import NO_DEBUG_ENV, NO_DEBUG_INFO, WHEELS
from kit.image.recipes import Recipe
from kit.image.wheels import HOST_PYTHON

BUILD = 4  # how the venv is made; part of its fingerprint, so a change rebuilds it
STAMP = ".kit-pins"  # in the venv, once made: its fingerprint and its compiled packages' origin

log = logger(__name__)


def host_versions(names: list[str]) -> dict[str, str | None]:
    """Installed version of each Debian package on the host (None when absent)."""
    p = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package}\t${Version}\t${db:Status-Status}\n", *names],
        capture_output=True,
        text=True,
    )
    have = {}
    for line in p.stdout.splitlines():
        name, version, status = ([*line.split("\t"), "", ""])[:3]
        have[name.split(":")[0]] = version if status == "installed" else None
    return {n: have.get(n) for n in names}


def mismatches(recipe: Recipe) -> list[str]:
    """'pkg=want (host: have)' for each apt pin the host does not satisfy."""
    pins = dict(p.split("=", 1) for p in recipe.native_apt)
    have = host_versions(list(pins))
    return [f"{n}={v} (host: {have[n] or 'none'})" for n, v in pins.items() if have[n] != v]


def host_suite(os_release: Path = Path("/etc/os-release")) -> str:
    """The host's Debian suite (VERSION_CODENAME), or "" when it does not say."""
    try:
        for line in os_release.read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return ""


def fingerprint(recipe: Recipe) -> str:
    """Identity of the native environment, filed as its 'digest' in trial records."""
    pins = (
        "\n".join(
            recipe.native_apt
            + recipe.pip_build
            + recipe.pip
            + recipe.pip_from_source
            + recipe.pip_host
        )
        + repr(recipe.compile)
        + f"build {BUILD}"
    )
    return "native:" + hashlib.sha256(pins.encode()).hexdigest()[:16]


def flavour_bin(recipe: Recipe, venv: Path) -> Path:
    """A folder whose mpicc, mpicxx, mpiexec and mpirun are the flavour's own, first on
    PATH while building: on a host with MPICH and Open MPI both, Horovod's CMake would
    otherwise link whichever MPI the unsuffixed names point to (its ranks then each
    see a world of one under the other flavour's launcher)."""
    suffix = recipe.mpi.spec.mpicc.rsplit(".", 1)[1]  # mpicc.mpich -> mpich
    folder = venv / "kit-mpi-bin"
    folder.mkdir(parents=True, exist_ok=True)
    for tool in ("mpicc", "mpicxx", "mpiexec", "mpirun"):
        target = shutil.which(f"{tool}.{suffix}")
        if target and not (folder / tool).exists():
            (folder / tool).symlink_to(target)
    return folder


def image_wheels(tag: str, dest: Path) -> str | None:
    """Copy the wheels image tag keeps in WHEELS into dest; the image's id, or None when
    no engine here answers or holds that image (then the caller compiles). The copy is
    made from the id inspected, so the id returned is the one the wheels came from."""
    if (info := engine.found(tag)) is None:
        return None
    with engine.created(info["Id"], "wheels") as container:
        copy = [engine.docker(), "cp", f"{container}:{WHEELS}/.", str(dest)]
        copied = subprocess.run(copy, capture_output=True).returncode == 0
    if not copied or not any(dest.glob("*.whl")):
        return None  # an image that keeps no wheels (built before it did)
    return info["Id"]


def compile_into(recipe: Recipe, python: Path, env: dict[str, str], tag: str) -> str:
    """Install the recipe's `compile` packages into the venv: the image's own wheels when
    the image is here, else built from source with the same pins. Says which, for the
    environment's identity."""
    assert recipe.compile is not None
    with tempfile.TemporaryDirectory(prefix="kit-wheels-") as tmp:
        image = image_wheels(tag, Path(tmp))
        if image:
            log.info(f"native: {tag}'s own wheels ({image[:19]})")
            wheels = sorted(str(w) for w in Path(tmp).glob("*.whl"))
            pip = ["--no-cache-dir", "--no-deps", "--no-index", *wheels]
            stream([str(python), "-m", "pip", "install", *pip], "pip install (image wheels)")
            return f"wheels of {tag} {image}"
    toolchain = python.parent.parent / "release.cmake"  # as the image's builder writes it
    toolchain.write_text("\n".join(NO_DEBUG_INFO) + "\n")
    stream(
        [str(python), "-m", "pip", "install", *recipe.compile_args()],
        "compile (native)",
        env={**env, "CMAKE_TOOLCHAIN_FILE": str(toolchain), **dict(recipe.compile.env)},
    )
    return "compiled on this host"


def ensure(recipe: Recipe, variant: str = "cpu") -> tuple[Path, str]:
    """The native python for recipe, building its venv once (a stamp file marks it done),
    and the environment's identity (filed as the records' digest): its pins, and where
    its compiled packages came from."""
    if shutil.which("dpkg-query") is None:
        raise KitError(
            "the native runtime needs a Debian host (dpkg-query); run the container runtimes only"
        )
    host = host_suite()
    if host and host != recipe.distro:
        raise KitError(
            f"the native runtime for {recipe.name} needs a Debian {recipe.distro} host (this "
            f"one is {host}): its packages are {recipe.distro}'s; run its container runtimes"
        )
    bad = mismatches(recipe)
    if bad:
        pins = " ".join(p.split(" ")[0] for p in bad)
        raise KitError(
            f"native environment for {recipe.name} needs the image's packages on the host: "
            f"{', '.join(bad)}; as root: apt-get install --no-install-recommends {pins}"
        )
    venv = cache_dir() / "native" / f"{recipe.name}-{recipe.version}"
    with exclusive(venv.with_name(f".{venv.name}.lock"), f"the native environment {venv}"):
        return _made(recipe, variant, venv)


def _made(recipe: Recipe, variant: str, venv: Path) -> tuple[Path, str]:
    """ensure()'s work, under its lock: the venv as it is if current, else made anew."""
    python = venv / "bin" / "python"
    stamp = venv / STAMP
    pins = fingerprint(recipe)
    try:
        stamped, _, origin = inputs.read_text(stamp, str(stamp), "").partition("\n")
    except inputs.Unreadable:  # none yet, or not one kit wrote whole: made anew
        stamped, origin = "", ""
    if stamped == pins and _current(recipe, variant, origin):
        return python, _identity(pins, origin)
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    stream([HOST_PYTHON, "-m", "venv", *recipe.venv_options, str(venv)], "native venv")
    env = {**os.environ, "MPICC": recipe.mpi.spec.mpicc, **dict(NO_DEBUG_ENV)}  # as the image's
    env["PATH"] = f"{flavour_bin(recipe, venv)}:{env.get('PATH', '')}"
    for args in recipe.pip_steps():
        stream([str(python), "-m", "pip", "install", *args], "pip install (native)", env=env)
    if recipe.pip_host:  # the very files the image installed
        host_wheels.fetch(recipe)
        host = [
            "--no-cache-dir",
            "--no-deps",
            "--no-index",
            "--find-links",
            str(host_wheels.folder()),
        ]
        stream([str(python), "-m", "pip", "install", *host, *recipe.pip_host], "pip (native)")
    origin = compile_into(recipe, python, env, recipe.tag(variant)) if recipe.compile else ""
    write_atomically(stamp, pins + (f"\n{origin}" if origin else ""))
    return python, _identity(pins, origin)


def _current(recipe: Recipe, variant: str, origin: str) -> bool:
    """Whether a built environment's compiled packages are still the ones to use: once the
    local image is rebuilt (a new id, newly compiled binaries) or appears after a host
    compile, the environment is made again from that image's own wheels."""
    if recipe.compile is None or (info := engine.found(recipe.tag(variant))) is None:
        return True
    return origin.endswith(info["Id"])


def _identity(pins: str, origin: str) -> str:
    """What the records file as the native environment's digest."""
    return pins + (f" ({origin})" if origin else "")
