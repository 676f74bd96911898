"""The native environment: the host's python and MPI with the image's own pins.

Same software natively and in the container is what makes an overhead figure
mean anything, so the host's apt packages must match the recipe's pins exactly
and the pip pins are built the same way (MPI packages from source with the
flavour's mpicc) into a venv over the system site packages.
"""

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from .errors import KitError
from .paths import cache_dir
from .proc import stream
from .recipes import Recipe

HOST_PYTHON = "/usr/bin/python3"
BUILD = 2  # how the venv is made; part of its fingerprint, so a change rebuilds it


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
        "\n".join(recipe.native_apt + recipe.pip_build + recipe.pip + recipe.pip_from_source)
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


def ensure(recipe: Recipe) -> Path:
    """The native python for recipe, building its venv once (a stamp file marks it done)."""
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
    python = venv / "bin" / "python"
    stamp = venv / ".kit-pins"
    if stamp.is_file() and stamp.read_text() == fingerprint(recipe):
        return python
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    stream([HOST_PYTHON, "-m", "venv", "--system-site-packages", str(venv)], "native venv")
    env = {**os.environ, "MPICC": recipe.mpi.spec.mpicc}
    env["PATH"] = f"{flavour_bin(recipe, venv)}:{env.get('PATH', '')}"
    for args in recipe.pip_steps():
        stream([str(python), "-m", "pip", "install", *args], "pip install (native)", env=env)
    if recipe.compile:
        env.update(recipe.compile.env)
        stream(
            [str(python), "-m", "pip", "install", *recipe.compile_args()],
            "compile (native)",
            env=env,
        )
    stamp.write_text(fingerprint(recipe))
    return python
