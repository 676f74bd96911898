"""Building blocks: a recipe becomes a list of format-neutral primitives.

As in HPC Container Maker, each block knows what to install and how; the
renderers in render.py turn the same primitives into a Dockerfile and an
Apptainer definition, so the two can never disagree on content.
"""

import re
import shlex
from dataclasses import dataclass

from kit.image.recipes import Recipe
from kit.image.wheels import CONTEXT

PREFIX = "/opt/kit"
VENV = f"{PREFIX}/venv"
BENCH_DIR = f"{PREFIX}/benchmarks"
PYTHON = f"{VENV}/bin/python"
CA_SECRET = "/run/secrets/cacert"  # where a build secret with id=cacert is mounted
WHEELS = f"{PREFIX}/wheels"  # the builder stage's output
HOST_WHEELS = "/tmp/kit-host-wheels"  # a recipe's host wheels, while they install
BUILDER = "builder"


@dataclass(frozen=True)
class Shell:
    """Commands run at build time; with secret=True the site CA bundle is mounted for them;
    `bind` (a build-context folder, a path) is there for these commands only, in no layer."""

    commands: tuple[str, ...]
    secret: bool = False
    bind: tuple[str, str] | None = None


@dataclass(frozen=True)
class Env:
    values: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Label:
    values: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Copy:
    """A path copied into the image: from the repository (the build context is its root),
    or, with `stage`, from an earlier build stage."""

    src: str
    dst: str
    stage: str = ""


Primitive = Shell | Env | Label | Copy


@dataclass(frozen=True)
class Stage:
    """One build stage from the base image; the last stage of a list is the image."""

    name: str
    prims: tuple[Primitive, ...]


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
            ("kit.source-date-epoch", str(r.epoch)),
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


# What package scripts leave behind that holds the time of the build or the state of
# the machine it ran on: apt's and dpkg's logs, ldconfig's cache of file dates,
# fontconfig's caches of folder dates (as mmdebstrap removes them from the base). A step
# that runs them removes them in the same layer; .pyc files are written hash-based
# (SOURCE_DATE_EPOCH is set for every step, kit.image.render), and file dates are
# clamped when the image is written (kit.image.reproducible).
VOLATILE = (
    "/var/log/dpkg.log",
    "/var/log/alternatives.log",
    "/var/log/apt/*.log",
    "/var/log/apt/eipp.log.xz",
    "/var/cache/ldconfig/aux-cache",
    "/var/cache/fontconfig/*",
)
FORGET = "rm -rf " + " ".join(VOLATILE)


# Debian's packages byte-compile Python's library with `python3 -E`, which ignores
# PYTHONHASHSEED: before 3.11, a .pyc holding a frozenset constant came out in another
# order in each build (caffe2 1.2.2: 27 of /usr/lib/python3.9's, seen by kit verify).
# Each .pyc of the library and of Debian's Python packages is compiled again from its
# source under the fixed seed, in the invalidation mode it was written in (checked-hash:
# SOURCE_DATE_EPOCH is set), and replaces the old one only where they differ, so a later
# step does not store the library again.
RECOMPILE = (
    "python3 -c 'import os, pathlib, py_compile as c, sys, sysconfig as s; "
    'tag = f".{sys.implementation.cache_tag}.pyc"; '
    "modes = {0: c.PycInvalidationMode.TIMESTAMP, 1: c.PycInvalidationMode.UNCHECKED_HASH, "
    "3: c.PycInvalidationMode.CHECKED_HASH}; "
    'roots = sorted({s.get_paths()["stdlib"], "/usr/lib/python3/dist-packages"}); '
    'pycs = [p for r in roots for p in sorted(pathlib.Path(r).rglob(f"__pycache__/*{tag}"))]; '
    'pairs = [(p, p.parent.parent / (p.name[: -len(tag)] + ".py")) for p in pycs]; '
    "[os.replace(n, p) if pathlib.Path(n).read_bytes() != p.read_bytes() else os.unlink(n) "
    'for p, py in pairs if py.is_file() for n in [c.compile(str(py), f"{p}.kit", '
    "doraise=True, invalidation_mode=modes[p.read_bytes()[4]])]]'"
)


def apt_install(r: Recipe, pins: tuple[str, ...]) -> Shell:
    """One layer of packages, without apt's leftovers (downloaded .deb files were 355 MB
    of every image) or what holds the time of the build (VOLATILE); under Python before
    3.11, with the .pyc files its package scripts wrote compiled again (RECOMPILE)."""
    seed = hash_seed(r)
    again = (f"{_assigned(seed)} {RECOMPILE}",) if seed else ()
    return Shell(
        (
            "apt-get -o APT::Sandbox::User=root update",
            "DEBIAN_FRONTEND=noninteractive apt-get -o APT::Sandbox::User=root install -y "
            "--no-install-recommends \\\n" + " \\\n".join(f"        {p}" for p in pins),
            *again,
            "apt-get clean",
            "rm -rf /var/lib/apt/lists/*",
            FORGET,
        )
    )


# Apptainer builds a definition unprivileged in a user namespace that maps only root,
# where package scripts that chown to other users fail; the definition's %post
# therefore re-runs itself under the distribution's own fakeroot (Apptainer's would
# be the sid root's, whose glibc the image lacks), told not to try the real chown
# (it fails with EINVAL for unmapped ids, which fakeroot would pass on).
FAKEROOT = {"bookworm": "1.31-1.2", "bullseye": "1.25.3-1.1", "jammy": "1.28-1ubuntu1"}


def under_fakeroot(r: Recipe) -> tuple[str, ...]:
    """The first lines of a definition's %post (Docker builds run as real root)."""
    apt = "apt-get -o APT::Sandbox::User=root"
    return (
        'if [ -z "${FAKEROOTKEY:-}" ]; then',
        f"    {apt} update && DEBIAN_FRONTEND=noninteractive {apt} install -y "
        f"--no-install-recommends fakeroot={FAKEROOT[r.distro]}",
        "    export FAKEROOTDONTTRYCHOWN=1",
        '    exec fakeroot -- /bin/bash "$0"',
        "fi",
    )


def mpi_select(r: Recipe) -> Shell:
    """Point mpicc/mpirun at the recipe's flavour even if a dependency pulled in the other."""
    spec = r.mpi.spec
    return Shell(
        (
            f"update-alternatives --set mpi /usr/bin/{spec.mpicc}",
            f"update-alternatives --set mpirun /usr/bin/{spec.mpirun}",
            FORGET,
        )
    )


def hash_seed(r: Recipe) -> tuple[tuple[str, str], ...]:
    """A fixed string-hash seed while Python byte-compiles (pip, and RECOMPILE after the
    apt steps), for Python before 3.11: its marshal writes a frozenset constant in hash
    order, which the seed drawn at each start changes, so the same .py gave another .pyc
    in each build (125 of caffe2-mpich 1.2.0's venv, Python 3.9, seen by kit verify).
    Python 3.11's do not differ (the bookworm images verify)."""
    pin = next((p for p in r.all_apt if p.startswith("python3=")), "")
    minor = re.match(r"python3=3\.(\d+)\.", pin)
    return (("PYTHONHASHSEED", "0"),) if minor and int(minor.group(1)) < 11 else ()


def _assigned(settings: tuple[tuple[str, str], ...]) -> str:
    """Environment settings as a command's leading `NAME=value` words, quoted for the shell."""
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in settings)


def _pip(r: Recipe, verb: str, args: list[str], env: tuple[tuple[str, str], ...] = ()) -> str:
    options = [a for a in args if a.startswith("--")]
    packages = [a for a in args if not a.startswith("--")]
    settings = (("MPICC", r.mpi.spec.mpicc), *NO_DEBUG_ENV, *hash_seed(r), *env)
    return (
        f"{_assigned(settings)} {VENV}/bin/pip {verb} {' '.join(options)}"
        ' ${KIT_PIP_INDEX_URL:+--index-url="$KIT_PIP_INDEX_URL"} \\\n'
        + " \\\n".join(f"        {p}" for p in packages)
    )


TRUST_CA = f"if [ -s {CA_SECRET} ]; then export PIP_CERT={CA_SECRET}; fi"


def python_env(r: Recipe) -> Shell:
    """A venv with the pip pins, over the system site where Debian's framework builds are.

    MPI-linked packages are compiled from source with the flavour's own mpicc: a
    wheel or Debian's python3-mpi4py would bring Open MPI into an MPICH image.
    """
    commands = [TRUST_CA, " ".join(["python3 -m venv", *r.venv_options, VENV])]
    commands += [_pip(r, "install", args) for args in r.pip_steps()]
    return Shell(tuple(commands), secret=True)


def host_wheels(r: Recipe) -> Shell:
    """The wheels the host's pip fetched (kit.image.wheels), installed from the very files
    the native environment installs, after the pins they depend on."""
    pip = f"{VENV}/bin/pip install --no-cache-dir --no-deps --no-index --find-links"
    return Shell((f"{pip} {HOST_WHEELS} {' '.join(r.pip_host)}",), bind=(CONTEXT, HOST_WHEELS))


# What pip compiles carries no debug information: no benchmark reads it, and it was a
# quarter of each compile here (mpi4py 3.1.4: 34 s -> 26 s, wheel 2.9 MB -> 0.6 MB, with
# CFLAGS=-g0; Horovod 0.28.1: 229 s -> 166 s, wheel 35.5 MB -> 1.9 MB). CMake builds in
# release-with-debug-info mode (Horovod's setup.py asks for it, and puts its -g after
# CFLAGS) keep that mode's optimisation through a toolchain file without -g.
NO_DEBUG_ENV = (("CFLAGS", "-g0"),)
RELEASE_CMAKE = f"{PREFIX}/release.cmake"
NO_DEBUG_INFO = tuple(
    f'set(CMAKE_{lang}_FLAGS_RELWITHDEBINFO "-O2 -DNDEBUG" CACHE STRING "")'
    for lang in ("C", "CXX", "CUDA")
)


SOURCES = "/tmp/kit-sources"


def compile_wheels(r: Recipe) -> Shell:
    """Builder stage: compile the `compile` packages into wheels against the frameworks,
    CMake projects through a toolchain file that leaves debug information out. Each
    source release is unpacked into a fixed folder and built there: in pip's own build
    folder, whose name is drawn at random, Horovod's compiled files kept that name
    (`__FILE__` in Gloo's messages), and each build gave other bytes (horovod-* 1.4.0,
    seen by kit verify)."""
    assert r.compile is not None
    unbuilt = ["--no-cache-dir", "--no-build-isolation", "--no-deps"]
    fetch = [*unbuilt, f"--no-binary={r.compile_names}", f"--dest={SOURCES}", *r.compile.packages]
    unpack = f'for a in {SOURCES}/*.tar.gz; do tar -xzf "$a" -C {SOURCES}; done'
    build = [f"--wheel-dir={WHEELS}", *unbuilt, f"{SOURCES}/*/"]
    toolchain = "printf '%s\\n' " + " ".join(shlex.quote(x) for x in NO_DEBUG_INFO)
    env = (("CMAKE_TOOLCHAIN_FILE", RELEASE_CMAKE), *r.compile.env)
    return Shell(
        (
            TRUST_CA,
            f"{toolchain} > {RELEASE_CMAKE}",
            _pip(r, "download", fetch),
            unpack,
            _pip(r, "wheel", build, env),
        ),
        secret=True,
    )


def install_wheels(r: Recipe) -> tuple[Copy, Shell]:
    """Final stage: copy the builder's wheels in, install them and prove the result works
    (e.g. `horovodrun --check-build`). The wheels stay in the image: they are what it
    runs, and the native environment installs the very same binaries from them. The
    check has a temporary folder of its own, removed with it: Open MPI left its session
    folder in /tmp (horovod-openmpi 1.4.0)."""
    assert r.compile is not None
    return (
        Copy(WHEELS, WHEELS, stage=BUILDER),
        Shell(
            (
                f"{VENV}/bin/pip install --no-cache-dir --no-deps --no-index {WHEELS}/*.whl",
                'TMPDIR="$(mktemp -d)"',
                "export TMPDIR",
                *r.compile.check,
                'rm -rf "$TMPDIR"',
                "unset TMPDIR",
            )
        ),
    )


APT_LIST = f"{PREFIX}/apt-packages.txt"
PIP_LIST = f"{PREFIX}/pip-packages.txt"


def manifest() -> Shell:
    """Record what the image really contains, read back by `kit build`."""
    return Shell(
        (
            f"mkdir -p {PREFIX}",
            "dpkg-query -W -f='${Package}=${Version}\\n' > " + APT_LIST,
            f"{VENV}/bin/python -m pip list --format=freeze > {PIP_LIST}",
        )
    )


# Labels listing every installed package: label -> the manifest file they are read from.
# Docker fixes labels before a build runs, so `kit build` reads the files from the built
# image and writes the labels into the config when it writes the image in reproducible
# form (kit.image.reproducible). Definitions carry the files; a SIF converted from the
# Docker image carries the labels.
CONTENTS = (("kit.apt-packages", APT_LIST), ("kit.pip-packages", PIP_LIST))


def benchmarks() -> Copy:
    """Last, so editing benchmarks/ rebuilds only this layer."""
    return Copy("benchmarks", BENCH_DIR)


def image(r: Recipe, variant: str) -> list[Stage]:
    """The build stages, in order. Both stages start with the same steps, which the
    builder (BuildKit) runs once; only the final stage's layers make the image. The
    frameworks' packages come first, before the image's identity and its MPI, so the
    images of one framework share that layer (pytorch-mpich and pytorch-openmpi: 1.5 GB
    built and stored once). The recipe's own environment comes late, so changing it
    rebuilds little."""
    packages = tuple(apt_install(r, pins) for pins in (r.apt, r.mpi.apt) if pins)
    runtime = (*packages, labels(r, variant), environment(r, variant), mpi_select(r), python_env(r))
    if r.pip_host:
        runtime = (*runtime, host_wheels(r))
    env = (Env(r.env),) if r.env else ()
    last = (manifest(), benchmarks())
    if r.compile is None:
        return [Stage("", (*runtime, *env, *last))]
    build = (apt_install(r, r.apt_build), compile_wheels(r))
    return [
        Stage(BUILDER, (*runtime, *build)),
        Stage("", (*runtime, *env, *install_wheels(r), *last)),
    ]
