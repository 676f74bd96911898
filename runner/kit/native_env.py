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


def fingerprint(recipe: Recipe) -> str:
    """Identity of the native environment, filed as its 'digest' in trial records."""
    pins = "\n".join(
        recipe.native_apt + recipe.pip_build + recipe.pip + recipe.pip_from_source
    ) + repr(recipe.compile)
    return "native:" + hashlib.sha256(pins.encode()).hexdigest()[:16]


def ensure(recipe: Recipe) -> Path:
    """The native python for recipe, building its venv once (a stamp file marks it done)."""
    if shutil.which("dpkg-query") is None:
        raise KitError(
            "the native runtime needs a Debian host (dpkg-query); run the container runtimes only"
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
