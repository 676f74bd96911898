"""Runtime adapters behind one interface, by the name users pass to --runtime."""

from ..errors import KitError
from .apptainer import Apptainer
from .base import Job, Prepared, Runtime
from .charliecloud import Charliecloud
from .docker import Docker
from .native import Native
from .shifter import Shifter

RUNTIMES: dict[str, type[Runtime]] = {
    r.name: r for r in (Native, Docker, Apptainer, Shifter, Charliecloud)
}
ALIASES = {"apptainer": "singularity"}

__all__ = ["RUNTIMES", "Job", "Prepared", "Runtime", "get", "parse"]


def get(name: str) -> Runtime:
    key = ALIASES.get(name, name)
    if key not in RUNTIMES:
        raise KitError(f"unknown runtime '{name}' (known: {', '.join(RUNTIMES)})")
    return RUNTIMES[key]()


def parse(spec: str) -> list[Runtime]:
    """'native,docker' -> adapters, in the order given, each once."""
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if not names:
        raise KitError("--runtime needs at least one name, e.g. --runtime native,docker")
    out = [get(n) for n in names]
    if len({r.name for r in out}) != len(out):
        raise KitError(f"--runtime '{spec}' names a runtime twice")
    return out
