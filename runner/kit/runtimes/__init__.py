"""The runtime registry: every Runtime subclass in this package, by the name users pass.

A runtime is added by adding its module here; the registry, `kit doctor`, the
--runtime help and the name checks all read what the class declares.
"""

import importlib
import pkgutil
import re

from kit.core import columns
from kit.core.errors import KitError
from kit.runtimes.base import Job, Prepared, Runtime

__all__ = ["ALIASES", "RUNTIMES", "Job", "Prepared", "Runtime", "get", "parse"]


def _discover() -> dict[str, type[Runtime]]:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    found: dict[str, type[Runtime]] = {}
    todo = [Runtime]
    while todo:
        for cls in todo.pop().__subclasses__():
            todo.append(cls)
            if cls.name:
                found[cls.name] = cls
    return dict(sorted(found.items()))


RUNTIMES = _discover()
ALIASES = {alias: name for name, cls in RUNTIMES.items() for alias in cls.aliases}


def described() -> str:
    """The runtimes, one per line, for --help."""
    rows = [
        (name, cls.summary + (f" (also: {', '.join(cls.aliases)})" if cls.aliases else ""))
        for name, cls in RUNTIMES.items()
    ]
    return "\n".join(columns.aligned(rows, indent="  "))


def products() -> str:
    """'Apptainer, Charliecloud, Docker, Podman, Podman-HPC and Shifter': every container
    runtime the registry has, for the line `kit --help` opens with."""
    names = sorted({cls.product for cls in RUNTIMES.values() if cls.product})
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


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
