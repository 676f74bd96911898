"""Running external commands as argument lists, with one-line errors."""

import shutil
import subprocess

from kit.core.errors import Failed, KitError
from kit.core.log import logger

STDERR_FD = 2  # a tool's progress goes where kit's own messages go

log = logger(__name__)


def which(cmd: str, fix: str) -> str:
    """The full path of cmd, or a KitError that says how to get it."""
    path = shutil.which(cmd)
    if path is None:
        raise KitError(f"'{cmd}' not found on PATH; {fix}")
    return path


def capture(argv: list[str], what: str, **kw) -> str:
    """Run argv, return stdout; on failure raise Failed (exit 1) with the last line of
    stderr; a tool not found is the usage error (exit 2): nothing ran."""
    log.debug(f"+ {' '.join(argv)}")  # --verbose: every command kit runs
    try:
        p = subprocess.run(argv, capture_output=True, text=True, **kw)
    except FileNotFoundError:
        raise KitError(f"{what}: '{argv[0]}' not found") from None
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise Failed(f"{what} failed (exit {p.returncode}): {tail}")
    return p.stdout


def stream(argv: list[str], what: str, **kw) -> None:
    """Run argv with its output shown live on stderr (long steps show progress; stdout is
    kept for the command's result, e.g. its --json), raise on failure."""
    log.info(f"+ {' '.join(argv)}")
    try:
        rc = subprocess.run(argv, **{"stdout": STDERR_FD, **kw}).returncode
    except FileNotFoundError:
        raise KitError(f"{what}: '{argv[0]}' not found") from None
    if rc != 0:
        raise Failed(f"{what} failed (exit {rc}); see the output above")


def version_line(text: str) -> str:
    """The version line of a tool's --version output: the first line, except for MPICH's
    Hydra, whose first line is a heading and whose version is its "Version:" field."""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    if lines and lines[0].startswith("HYDRA"):
        version = next((x.split(":", 1)[1].strip() for x in lines if x.startswith("Version:")), "")
        return f"MPICH (Hydra) {version}".strip()
    return lines[0] if lines else "unknown"
