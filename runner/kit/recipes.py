"""Recipes: one TOML file per image, validated into a Recipe."""

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import KitError
from .paths import repo_root


@dataclass(frozen=True)
class Flavour:
    """How one MPI flavour is named on Debian: its packages and wrapper commands."""

    packages: tuple[str, ...]
    mpicc: str
    mpirun: str


FLAVOURS = {
    "mpich": Flavour(("mpich", "libmpich-dev"), "mpicc.mpich", "mpirun.mpich"),
    "openmpi": Flavour(("openmpi-bin", "libopenmpi-dev"), "mpicc.openmpi", "mpirun.openmpi"),
}
VARIANTS = ("cpu", "cuda")
APT_PIN = re.compile(r"^[a-z0-9][a-z0-9+.-]*=[A-Za-z0-9.+:~-]+$")
PIP_PIN = re.compile(r"^[A-Za-z0-9._-]+==[A-Za-z0-9.+!-]+$")


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
class Recipe:
    name: str
    version: str
    description: str
    distro: str
    mpi: Mpi
    apt: tuple[str, ...]
    pip: tuple[str, ...]
    pip_from_source: tuple[str, ...]
    pip_build: tuple[str, ...]
    frameworks: dict[str, str]
    benchmarks: tuple[str, ...]
    variants: tuple[str, ...]
    path: Path

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

    def check_variant(self, variant: str) -> None:
        if variant not in self.variants:
            raise KitError(
                f"image '{self.name}' has no variant '{variant}' (has: {', '.join(self.variants)})"
            )

    @property
    def all_apt(self) -> tuple[str, ...]:
        """Every apt pin, the image's and the native environment's alike."""
        return self.apt + self.mpi.apt


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


def parse(path: Path) -> Recipe:
    """Read and validate one recipe file; every error names the file and the key."""
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise KitError(f"{path}: not valid TOML ({e})") from None
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
    for v in variants:
        if v not in VARIANTS:
            raise KitError(f"{path}: variant '{v}' is not one of {', '.join(VARIANTS)}")
    return Recipe(
        name=name,
        version=_get(data, "version", str, path),
        description=_get(data, "description", str, path),
        distro=_get(data, "distro", str, path),
        mpi=Mpi(flavour, _get(mpi, "version", str, path)),
        apt=_pins(_get(apt, "packages", list, path), APT_PIN, "apt", path),
        pip=_pins(pip.get("packages", []), PIP_PIN, "pip", path),
        pip_from_source=tuple(pip.get("from_source", [])),
        pip_build=_pins(pip.get("build", []), PIP_PIN, "pip build", path),
        frameworks=dict(_get(data, "frameworks", dict, path)),
        benchmarks=tuple(_get(data, "benchmarks", list, path)),
        variants=variants,
        path=path,
    )


def recipe_dir() -> Path:
    return repo_root() / "recipes"


def load_all() -> dict[str, Recipe]:
    return {p.stem: parse(p) for p in sorted(recipe_dir().glob("*.toml"))}


def load(name: str) -> Recipe:
    """One recipe by image name, with the known names in the error when it is unknown."""
    path = recipe_dir() / f"{name}.toml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in recipe_dir().glob("*.toml"))) or "none"
        raise KitError(f"unknown image '{name}' (known: {known}); see 'kit list'")
    return parse(path)
