"""A recipe's host wheels (`[pip] host`): fetched once by the host's pip into the build
context, then installed from those very files in the image and in the native environment.

Some builds are reachable only by the host's pip: PyTorch's CPU wheels come from
upstream's CPU index or a site's mirror, while a build container reaches PyPI alone,
whose Linux torch wheels are CUDA builds of several GB. One set of files for both arms
is what makes the native arm run the binaries the image runs. Where pip looks is pip's
own setting (pip.conf, PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS).
"""

import re
from pathlib import Path

from kit.core.errors import KitError
from kit.core.paths import cache_dir, exclusive, repo_root
from kit.core.proc import capture
from kit.image.recipes import Recipe

HOST_PYTHON = "/usr/bin/python3"  # the Debian Python the recipes' images have too
CONTEXT = ".kit-wheels"  # under the repository root (the build context); every recipe's


def folder() -> Path:
    """Where every recipe's host wheels are kept: pip's --find-links, natively and in builds."""
    return repo_root() / CONTEXT


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _file_of(pin: str, files: list[Path]) -> Path | None:
    """The wheel file that is this pin (name==version, as in its file name)."""
    name, version = pin.split("==")
    return next(
        (f for f in files if f.name.split("-")[:2] == [_normal(name), version]),
        None,
    )


def for_image(r: Recipe) -> list[str]:
    """pip download's target: the image's CPython (its python3 pin), whatever Python the
    host runs (a CI runner's may be newer). Its micro version too: a release may exclude
    early ones (cryptography 44 on: Requires-Python != 3.9.0, != 3.9.1)."""
    pin = next((p for p in r.apt if p.startswith("python3=")), "")
    match = re.match(r"python3=(\d+)\.(\d+)\.(\d+)", pin)
    if not match:
        raise KitError(f"{r.path}: [pip] host needs the image's Python pinned (python3=X.Y.Z)")
    major, minor, micro = match.groups()
    abi = f"cp{major}{minor}"
    return ["--implementation", "cp", "--python-version", f"{major}.{minor}.{micro}", "--abi", abi]


def fetch(r: Recipe) -> list[Path]:
    """The recipe's host wheels, downloaded by the host's pip where missing."""
    if not r.pip_host:
        return []
    kept = folder()
    try:
        kept.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KitError(
            f"cannot write {kept} ({e.strerror}); build from a checkout you can write"
        ) from None
    with exclusive(cache_dir() / "host-wheels.lock", f"the host wheels in {kept}"):
        for pin in r.pip_host:
            if _file_of(pin, list(kept.glob("*.whl"))) is None:
                print(f"pip download {pin} (the host's pip, for {r.name})", flush=True)
                argv = [HOST_PYTHON, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
                argv += [*for_image(r), "--dest", str(kept), pin]
                try:
                    capture(argv, f"pip download {pin}")
                except KitError as e:
                    raise KitError(
                        f"{r.name} installs {pin} from the host's pip, which could not fetch "
                        f"it ({e}); point pip at an index that has it (pip.conf, "
                        "PIP_EXTRA_INDEX_URL or PIP_FIND_LINKS) and build again"
                    ) from None
        files = list(kept.glob("*.whl"))
        wanted = {pin: _file_of(pin, files) for pin in r.pip_host}
    if missing := [pin for pin, f in wanted.items() if f is None]:
        raise KitError(f"pip fetched no wheel named as {', '.join(missing)} into {kept}")
    return [f for f in wanted.values() if f is not None]
