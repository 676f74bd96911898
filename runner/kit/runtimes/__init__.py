"""Runtime adapters behind one interface, by the name users pass to --runtime."""

import re

from ..errors import KitError
from .apptainer import Apptainer, ApptainerBind
from .base import Job, Prepared, Runtime
from .charliecloud import Charliecloud
from .docker import Docker
from .native import Native
from .shifter import Shifter

RUNTIMES: dict[str, type[Runtime]] = {
    r.name: r for r in (Native, Docker, Apptainer, ApptainerBind, Shifter, Charliecloud)
}
ALIASES = {"apptainer": "singularity", "apptainer-bind": "singularity-bind"}

__all__ = ["RUNTIMES", "Job", "Prepared", "Runtime", "get", "parse"]


def get(arm: str) -> Runtime:
    """The adapter for 'NAME' or 'NAME@LABEL'; a label makes a second arm of the same
    runtime (an A/A check, or the same runtime with other --runtime-arg options)."""
    name, sep, label = arm.partition("@")
    key = ALIASES.get(name, name)
    if key not in RUNTIMES:
        raise KitError(f"unknown runtime '{name}' (known: {', '.join(RUNTIMES)})")
    if sep and not re.fullmatch(r"[A-Za-z0-9_.-]+", label):
        raise KitError(f"runtime label in '{arm}' must be letters, digits, '_', '.' or '-'")
    rt = RUNTIMES[key]()
    rt.arm = f"{key}@{label}" if sep else key
    return rt


def parse(spec: str) -> list[Runtime]:
    """'native,docker,native@b' -> adapters, in the order given, each arm once."""
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise KitError("--runtime needs at least one name, e.g. --runtime native,docker")
    out = [get(n) for n in names]
    if len({r.arm for r in out}) != len(out):
        raise KitError(
            f"--runtime '{spec}' names a runtime twice; label a second arm, e.g. native@b"
        )
    return out
