"""Recipes: one TOML file per image, validated into a Recipe."""

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from kit.core import inputs, schema
from kit.core.errors import KitError
from kit.core.paths import repo_root
from kit.image.debian_base import base_tag


@dataclass(frozen=True)
class Flavour:
    """How one MPI flavour is named on Debian: its packages and wrapper commands."""

    packages: tuple[str, ...]
    mpicc: str
    mpirun: str
    library: str  # the shared library's soname (what a bind model swaps in)


FLAVOURS = {
    "mpich": Flavour(("mpich", "libmpich-dev"), "mpicc.mpich", "mpirun.mpich", "libmpich.so.12"),
    "openmpi": Flavour(
        ("openmpi-bin", "libopenmpi-dev"), "mpicc.openmpi", "mpirun.openmpi", "libmpi.so.40"
    ),
}
VARIANTS = ("cpu", "cuda")
SNAPSHOT_TIME = "%Y%m%dT%H%M%SZ"  # a Debian snapshot service's timestamp
APT_PIN = re.compile(r"^[a-z0-9][a-z0-9+.-]*=[A-Za-z0-9.+:~-]+$")
PIP_PIN = re.compile(r"^[A-Za-z0-9._-]+==[A-Za-z0-9.+!-]+$")
F = schema.Field
_PKG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}")
TOP = {
    "name": F(str, schema.NAME),
    "version": F(str, re.compile(r"[0-9A-Za-z][0-9A-Za-z.+~_-]{0,62}")),
    "source_date_epoch": F(int),
    "debian_snapshot": F(str),
    "description": F(str, schema.TEXT),
    "distro": F(str, re.compile(r"[a-z]{2,20}")),
    "stack": F(str, re.compile("current|historical")),
    "base": F(str, re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,200}")),
    "variants": F(list, re.compile("|".join(VARIANTS))),
    "benchmarks": F(list, schema.NAME),
    "frameworks": F(dict),
    "env": F(dict),
    "mpi": F(dict),
    "apt": F(dict),
    "pip": F(dict),
    "compile": F(dict),
    "variant": F(dict),
}
TABLES = {
    "mpi": {"flavour": F(str), "version": F(str, re.compile(r"[A-Za-z0-9.+:~-]{1,64}"))},
    "apt": {"packages": F(list, APT_PIN), "build": F(list, APT_PIN)},
    "pip": {
        "packages": F(list, PIP_PIN),
        "from_source": F(list, _PKG),
        "build": F(list, PIP_PIN),
        "host": F(list, PIP_PIN),
    },
    "compile": {"packages": F(list, PIP_PIN), "env": F(dict), "check": F(list, schema.TEXT)},
}
ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
MAPPINGS = {  # tables of free keys: key pattern, value field
    "env": (ENV_KEY, F(str, schema.TEXT)),
    "frameworks": (_PKG, F(str, re.compile(r"[A-Za-z0-9.+_-]{1,40}"))),
}


def _check_mapping(where: Path, table: str, data: dict, key: re.Pattern, value: schema.Field):
    for k, v in data.items():
        if not key.fullmatch(k):
            raise KitError(
                f"{where}: [{table}] key {k!r} is not allowed (must match {key.pattern})"
            )
        schema.check_value(f"{where}: [{table}] {k}", v, value)


def check_schema(data: dict, where: Path, overriding: bool = False) -> None:
    """Every key known and every value of its type and alphabet (a variant's table holds
    only what it overrides)."""
    top = {k: f for k, f in TOP.items() if not (overriding and k in ("name", "variant"))}
    schema.check_table(where, "", data, top)
    for table, fields in TABLES.items():
        if table in data:
            schema.check_table(where, table, data[table], fields)
    for table, (key, value) in MAPPINGS.items():
        if table in data:
            _check_mapping(where, table, data[table], key, value)
    if "env" in data.get("compile", {}):
        _check_mapping(where, "compile.env", data["compile"]["env"], *MAPPINGS["env"])
    for name, override in data.get("variant", {}).items():
        if name not in VARIANTS:
            raise KitError(f"{where}: [variant.{name!r}] is not one of {', '.join(VARIANTS)}")
        check_schema(override, f"{where} [variant.{name}]", overriding=True)


@dataclass(frozen=True)
class Mpi:
    flavour: str
    version: str  # the Debian package version, e.g. 4.0.2-3

    @property
    def spec(self) -> Flavour:
        return FLAVOURS[self.flavour]

    @property
    def apt(self) -> tuple[str, ...]:
        return tuple(f"{p}={self.version}" for p in self.spec.packages)


@dataclass(frozen=True)
class Compile:
    """Python packages compiled in a builder stage (with apt `build` packages there only);
    the final stage installs the wheels and runs `check` to prove the build works."""

    packages: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    check: tuple[str, ...]


@dataclass(frozen=True)
class Recipe:
    name: str
    version: str
    description: str
    distro: str
    mpi: Mpi
    apt: tuple[str, ...]
    apt_build: tuple[str, ...]  # builder stage only (compilers, headers)
    pip: tuple[str, ...]
    pip_from_source: tuple[str, ...]
    pip_build: tuple[str, ...]
    pip_host: tuple[str, ...]  # wheels the host's pip fetches; the image and native install them
    frameworks: dict[str, str]
    benchmarks: tuple[str, ...]
    variants: tuple[str, ...]
    path: Path
    stack: str  # current: today's frameworks; historical: the studies' (last working versions)
    epoch: int  # SOURCE_DATE_EPOCH: every date in the image (kit.image.reproducible)
    compile: Compile | None = None
    snapshot: str = ""  # the Debian archive's state it was locked on (kit.image.debian_base)
    base: str = ""  # the image to build FROM: the local Debian base unless a variant says
    env: tuple[tuple[str, str], ...] = ()  # extra environment of the image
    overrides: dict = field(default_factory=dict, compare=False, repr=False)  # [variant.X]
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def label(self) -> str:
        """What records and reports call the image (a foreign image: its REF)."""
        return self.name

    def for_variant(self, variant: str) -> "Recipe":
        """The recipe as built for one variant: its [variant.NAME] table over the rest."""
        self.check_variant(variant)
        if variant not in self.overrides:
            return self
        data = {k: v for k, v in self.raw.items() if k != "variant"}
        return _build(_merge(data, self.overrides[variant]), self.path)

    @property
    def local_base(self) -> bool:
        """Built FROM the local `kit base` image (no registry needed)."""
        return self.base == base_tag(self.distro)

    def tag(self, variant: str = "cpu") -> str:
        """The local Docker tag: recipe version and variant, so images never collide."""
        return f"kit/{self.name}:{self.version}-{variant}"

    def pip_steps(self) -> list[list[str]]:
        """`pip install` arguments, in order: pinned build requirements first, then the
        packages built against them without isolation (so no unpinned setuptools sneaks in)."""
        if not self.pip:
            return []
        steps = [["--no-cache-dir", *self.pip_build]] if self.pip_build else []
        main = ["--no-cache-dir"]
        if self.pip_build:
            main.append("--no-build-isolation")
        if self.pip_from_source:
            main.append("--no-binary=" + ",".join(self.pip_from_source))
        return [*steps, main + list(self.pip)]

    def compile_args(self) -> list[str]:
        """pip arguments that compile the `compile` packages from source against what
        is installed (no build isolation: Horovod builds against the installed frameworks)."""
        if self.compile is None:
            return []
        return [
            "--no-cache-dir",
            "--no-build-isolation",
            "--no-deps",
            f"--no-binary={self.compile_names}",
            *self.compile.packages,
        ]

    @property
    def compile_names(self) -> str:
        """The `compile` packages' names, as pip's --no-binary takes them."""
        return ",".join(p.split("==")[0] for p in self.compile.packages) if self.compile else ""

    def check_variant(self, variant: str) -> None:
        if variant not in self.variants:
            raise KitError(
                f"image '{self.name}' has no variant '{variant}' (has: {', '.join(self.variants)})"
            )

    @property
    def all_apt(self) -> tuple[str, ...]:
        """Every apt pin of the final image."""
        return self.apt + self.mpi.apt

    @property
    def venv_options(self) -> list[str]:
        """`python -m venv` options: over the system site when the recipe takes Python
        packages from Debian (python3-torch), else isolated, so that a host's own Debian
        modules (its torchvision) cannot reach the native arm, as none reach the image."""
        tools = ("python3", "python3-venv", "python3-dev", "python3-pip")
        debian = [
            p for p in self.all_apt if p.startswith("python3") and p.split("=")[0] not in tools
        ]
        return ["--system-site-packages"] if debian else []

    @property
    def native_apt(self) -> tuple[str, ...]:
        """What the host needs for the native environment: the image's pins, and the
        builder's too, since the native side compiles the same packages in place."""
        return self.all_apt + self.apt_build


def _get(data: dict, key: str, kind: type, where: Path):
    if key not in data:
        raise KitError(f"{where}: missing key '{key}'")
    value = data[key]
    if not isinstance(value, kind):
        raise KitError(f"{where}: '{key}' must be a {kind.__name__}, got {value!r}")
    return value


def _pins(values: list, pattern: re.Pattern, what: str, where: Path) -> tuple[str, ...]:
    for v in values:
        if not isinstance(v, str) or not pattern.match(v):
            raise KitError(f"{where}: {what} pin {v!r} must look like {pattern.pattern}")
    return tuple(values)


def _merge(parent: dict, child: dict) -> dict:
    """child over parent: tables merge key by key, anything else is replaced."""
    out = dict(parent)
    for k, v in child.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _read(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A recipe's data, with `extends = "other"` resolved: the same software in another
    MPI flavour is one short file, and the flavours cannot drift apart. It is read through
    kit.core.inputs: a named pipe among the recipes (kit list, render) hung open()."""
    if path in seen:
        raise KitError(f"{path}: 'extends' loops back to itself")
    fix = "give a recipe's TOML text, or move it out of recipes/"
    data = inputs.read_toml(path, str(path), fix, "a recipe")
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str) or not schema.NAME.fullmatch(parent):
        raise KitError(f"{path}: extends {parent!r} must name a recipe (letters, digits, .-_)")
    parent_path = path.with_name(f"{parent}.toml")
    if not parent_path.is_file():
        raise KitError(f"{path}: extends unknown recipe '{parent}'")
    return _merge(_read(parent_path, (*seen, path)), data)


def parse(path: Path) -> Recipe:
    """Read and validate one recipe file; every error names the file and the key."""
    return _build(_read(path), path)


def _build(data: dict, path: Path) -> Recipe:
    check_schema(data, path)
    name = _get(data, "name", str, path)
    if name != path.stem:
        raise KitError(f"{path}: name '{name}' must match the file name '{path.stem}'")
    mpi = _get(data, "mpi", dict, path)
    flavour = _get(mpi, "flavour", str, path)
    if flavour not in FLAVOURS:
        raise KitError(f"{path}: mpi flavour '{flavour}' is not one of {', '.join(FLAVOURS)}")
    apt = _get(data, "apt", dict, path)
    pip = data.get("pip", {})
    variants = tuple(_get(data, "variants", list, path))
    comp = data.get("compile")
    if comp is not None:
        comp = Compile(
            packages=_pins(_get(comp, "packages", list, path), PIP_PIN, "compile", path),
            env=tuple((str(k), str(v)) for k, v in _get(comp, "env", dict, path).items()),
            check=tuple(_get(comp, "check", list, path)),
        )
    for v in variants:
        if v not in VARIANTS:
            raise KitError(f"{path}: variant '{v}' is not one of {', '.join(VARIANTS)}")
    overrides = data.get("variant", {})
    for v in overrides:
        if v not in variants:
            raise KitError(f"{path}: [variant.{v}] is not in variants {list(variants)}")
    distro = _get(data, "distro", str, path)
    base = data.get("base", base_tag(distro))
    epoch = _get(data, "source_date_epoch", int, path)
    if not 0 < epoch < 2**32:
        raise KitError(
            f"{path}: source_date_epoch {epoch} must be seconds since 1970 (e.g. 1795824000)"
        )
    snapshot = data.get("debian_snapshot", "")
    if snapshot and not _is_time(snapshot):
        raise KitError(
            f"{path}: debian_snapshot {snapshot!r} is not a UTC time like 20260712T000000Z "
            "(the Debian archive's state the recipe's lock was made on)"
        )
    return Recipe(
        name=name,
        version=_get(data, "version", str, path),
        description=_get(data, "description", str, path),
        distro=distro,
        base=base,
        env=tuple((str(k), str(v)) for k, v in data.get("env", {}).items()),
        mpi=Mpi(flavour, _get(mpi, "version", str, path)),
        apt=_pins(_get(apt, "packages", list, path), APT_PIN, "apt", path),
        apt_build=_pins(apt.get("build", []), APT_PIN, "apt build", path),
        pip=_pins(pip.get("packages", []), PIP_PIN, "pip", path),
        pip_from_source=tuple(pip.get("from_source", [])),
        pip_build=_pins(pip.get("build", []), PIP_PIN, "pip build", path),
        pip_host=_pins(pip.get("host", []), PIP_PIN, "pip host", path),
        frameworks=dict(_get(data, "frameworks", dict, path)),
        benchmarks=tuple(_get(data, "benchmarks", list, path)),
        variants=variants,
        path=path,
        stack=_get(data, "stack", str, path),
        epoch=epoch,
        compile=comp,
        # Debian's archive as of then: for builds from kit's Debian base only (a variant
        # FROM a registry image, e.g. Ubuntu's, keeps its own sources)
        snapshot=snapshot if base == base_tag(distro) else "",
        overrides=overrides,
        raw=data,
    )


def _is_time(text: str) -> bool:
    if not re.fullmatch(r"\d{8}T\d{6}Z", text):  # strptime's %d takes a space too
        return False
    try:
        datetime.strptime(text, SNAPSHOT_TIME)
    except ValueError:
        return False
    return True


def recipe_dir() -> Path:
    return repo_root() / "recipes"


def load_all() -> dict[str, Recipe]:
    return {p.stem: parse(p) for p in sorted(recipe_dir().glob("*.toml"))}


def load(name: str) -> Recipe:
    """One recipe by image name, with the known names in the error when it is unknown."""
    path = recipe_dir() / f"{name}.toml"
    if not schema.NAME.fullmatch(name) or not path.is_file():
        known = ", ".join(sorted(p.stem for p in recipe_dir().glob("*.toml"))) or "none"
        raise KitError(f"unknown image '{name}' (known: {known}); see 'kit list'")
    return parse(path)
