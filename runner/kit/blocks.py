"""Building blocks: a recipe becomes a list of format-neutral primitives.

As in HPC Container Maker, each block knows what to install and how; the
renderers in render.py turn the same primitives into a Dockerfile and an
Apptainer definition, so the two can never disagree on content.
"""

from dataclasses import dataclass

from .recipes import Recipe

PREFIX = "/opt/kit"
VENV = f"{PREFIX}/venv"
BENCH_DIR = f"{PREFIX}/benchmarks"
PYTHON = f"{VENV}/bin/python"
CA_SECRET = "/run/secrets/cacert"  # where a build secret with id=cacert is mounted


@dataclass(frozen=True)
class Shell:
    """Commands run at build time; with secret=True the site CA bundle is mounted for them."""

    commands: tuple[str, ...]
    secret: bool = False


@dataclass(frozen=True)
class Env:
    values: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Label:
    values: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Copy:
    """A path in the repository copied into the image (build context: the repository root)."""

    src: str
    dst: str


Primitive = Shell | Env | Label | Copy


def labels(r: Recipe, variant: str) -> Label:
    return Label(
        (
            ("org.opencontainers.image.title", r.name),
            ("org.opencontainers.image.version", r.version),
            ("org.opencontainers.image.description", r.description),
            ("kit.recipe", r.name),
            ("kit.recipe.version", r.version),
            ("kit.variant", variant),
            ("kit.mpi.flavour", r.mpi.flavour),
            ("kit.mpi.version", r.mpi.version),
        )
    )


def environment(r: Recipe, variant: str) -> Env:
    """Identity of the image, visible to the benchmarks it runs (they put it in each record)."""
    return Env(
        (
            ("KIT_IMAGE", r.name),
            ("KIT_RECIPE_VERSION", r.version),
            ("KIT_VARIANT", variant),
            ("KIT_MPI_FLAVOUR", r.mpi.flavour),
            ("PATH", f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
        )
    )


def apt_install(pins: tuple[str, ...]) -> Shell:
    return Shell(
        (
            "apt-get update",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\\n"
            + " \\\n".join(f"        {p}" for p in pins),
            "rm -rf /var/lib/apt/lists/*",
        )
    )


def mpi_select(r: Recipe) -> Shell:
    """Point mpicc/mpirun at the recipe's flavour even if a dependency pulled in the other."""
    spec = r.mpi.spec
    return Shell(
        (
            f"update-alternatives --set mpi /usr/bin/{spec.mpicc}",
            f"update-alternatives --set mpirun /usr/bin/{spec.mpirun}",
        )
    )


def python_env(r: Recipe) -> Shell:
    """A venv over the system site (Debian's framework builds) with the pip pins.

    MPI-linked packages are compiled from source with the flavour's own mpicc: a
    wheel or Debian's python3-mpi4py would bring Open MPI into an MPICH image.
    """
    commands = [
        f"if [ -s {CA_SECRET} ]; then export PIP_CERT={CA_SECRET}; fi",
        f"python3 -m venv --system-site-packages {VENV}",
    ]
    for args in r.pip_steps():
        options = [a for a in args if a.startswith("--")]
        packages = [a for a in args if not a.startswith("--")]
        commands.append(
            f"MPICC={r.mpi.spec.mpicc} {VENV}/bin/pip install {' '.join(options)}"
            ' ${KIT_PIP_INDEX_URL:+--index-url="$KIT_PIP_INDEX_URL"} \\\n'
            + " \\\n".join(f"        {p}" for p in packages)
        )
    return Shell(tuple(commands), secret=True)


def manifest() -> Shell:
    """Record what the image really contains, read back by `kit build`."""
    return Shell(
        (
            f"mkdir -p {PREFIX}",
            "dpkg-query -W -f='${Package}=${Version}\\n' > " + f"{PREFIX}/apt-packages.txt",
            f"{VENV}/bin/python -m pip list --format=freeze > {PREFIX}/pip-packages.txt",
        )
    )


def benchmarks() -> Copy:
    """Last, so editing benchmarks/ rebuilds only this layer."""
    return Copy("benchmarks", BENCH_DIR)


def image(r: Recipe, variant: str) -> list[Primitive]:
    """The whole image, in build order."""
    return [
        labels(r, variant),
        environment(r, variant),
        apt_install(r.all_apt),
        mpi_select(r),
        python_env(r),
        manifest(),
        benchmarks(),
    ]
