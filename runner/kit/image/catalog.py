"""What `kit list` shows: each recipe's facts, and each image's built size when an
engine answers (a missing or confused engine is a note, never a failure)."""

from kit.core import columns
from kit.core.errors import KitError
from kit.core.log import logger
from kit.image import engine, recipes

HEAD = ("IMAGE", "VERSION", "STACK", "MPI", "DISTRO", "VARIANTS", "SIZE")

log = logger(__name__)


def rows() -> list[dict]:
    """Every recipe as plain data (`kit list --json`, CI's build matrix)."""
    return [
        {
            "name": r.name,
            "version": r.version,
            "mpi": r.mpi.flavour,
            "mpi_version": r.mpi.version,
            "distro": r.distro,
            "stack": r.stack,
            "frameworks": r.frameworks,
            "variants": list(r.variants),
            "tags": {v: r.tag(v) for v in r.variants},  # the local tag of each variant
            "benchmarks": list(r.benchmarks),
            "description": r.description,
        }
        for r in recipes.load_all().values()
    ]


def sizes() -> dict[str, str]:
    """Built size of each image's cpu variant, when an engine answers."""
    try:
        engine.server_version()
    except KitError as e:
        log.info(f"kit: note: SIZE not shown: {e}")
        return {}
    out = {}
    for r in recipes.load_all().values():
        info = engine.inspect(r.tag("cpu"))
        out[r.name] = f"{info['Size'] / 1e9:.2f} GB" if info else "not built"
    return out


def table(listed: list[dict], built: dict[str, str]) -> str:
    """The text table (core.columns), the frameworks last."""
    rows = [(*HEAD, "FRAMEWORKS")]
    for r in listed:
        fw = ", ".join(f"{k} {v}" for k, v in r["frameworks"].items())
        rows.append((
            r["name"], r["version"], r["stack"], r["mpi"], r["distro"],
            ",".join(r["variants"]), built.get(r["name"], "-"), fw,
        ))  # fmt: skip
    return "\n".join(columns.aligned(rows))
