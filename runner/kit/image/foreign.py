"""An image kit did not build (`kit run --image REF`): one in the local Docker engine
(`docker:NAME[:TAG]`), a `docker save` archive (loaded into the engine), or a SIF file.

kit's own conversion pipeline makes what each runtime runs from it, filed under its
digest like a recipe's image (`kit convert`): the engine's image for Docker, its
`docker save` archive for Podman, a SIF for Apptainer (a SIF given is used as it is),
the squashfs for Charliecloud (a SIF's own primary partition, taken out once). The MPI
it carries is read from its files, so a launch its ranks cannot survive is refused
before the first trial.
"""

import dataclasses
import hashlib
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kit.core import benches, inputs
from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.paths import (
    exclusive,
    made_whole,
    repo_root,
    sha256_of,
    write_atomically,
)
from kit.core.proc import capture, which
from kit.image import convert, engine, marks
from kit.image.blocks import BENCH_DIR
from kit.image.recipes import FLAVOURS, Mpi

FORMS = "docker:NAME[:TAG] (an image in the local engine), PATH.tar (docker save) or PATH.sif"
SIF_MAGIC = b"SIF_MAGIC"
NO_MPI = Mpi("mpich", "")  # one rank: no launcher is used
# A library's file name -> the MPI family whose ranks load it (the ABI a launcher must match)
MPI_LIBRARIES = (
    (re.compile(r"^libmpich\.so\.12(\.|$)"), "mpich"),
    (re.compile(r"^libmpi\.so\.12(\.|$)"), "mpich"),  # MPICH-ABI builds (Cray MPICH, Intel MPI)
    (re.compile(r"^libmpi\.so\.40(\.|$)"), "openmpi"),
)
# A program only a family's launcher brings: it decides when an image holds both libraries
# (Debian's PyTorch links Open MPI's, beside the MPICH the image's mpirun starts).
MPI_LAUNCHERS = (
    (re.compile(r"^(hydra_pmi_proxy|mpiexec\.hydra)$"), "mpich"),
    (re.compile(r"^(orted|prted|prterun)$"), "openmpi"),
)

log = logger(__name__)


@dataclass(frozen=True)
class Foreign:
    """The image as kit's conversions and runtimes take it (the parts of a recipe they read)."""

    source: str  # REF as the user gave it: what every record names
    kind: str  # "engine" or "sif"
    ref: str  # the engine's reference, or the SIF's absolute path
    digest: str  # the engine's image id, or sha256 of the SIF file
    benchmarks: tuple[str, ...] = ()  # the command's name: the one benchmark it runs
    version: str = "foreign"  # in place of a recipe version
    variant: str = "cpu"
    env: tuple[tuple[str, str], ...] = ()
    mpi: Mpi = NO_MPI  # what its ranks load (read for more than one rank)
    mpi_library: str = ""  # the library file that says so ("": not read, or none)
    python: str = ""  # with kit's benchmarks added: the image's own interpreter
    variants: tuple[str, ...] = ("cpu",)
    stack: str = "own"  # the user's own software, neither of kit's stacks

    @property
    def label(self) -> str:
        return self.source

    @property
    def name(self) -> str:
        """Its folder in the conversion cache: one per image as named (a SIF's path, an
        engine image's REF), holding a folder per digest, as a recipe's does, so that a
        rebuilt image's conversions replace those of the build before it."""
        named = self.ref if self.kind == "sif" else self.source
        return "foreign-" + hashlib.sha256(named.encode()).hexdigest()[:16]

    def tag(self, variant: str) -> str:
        return self.ref

    def config(self) -> dict:
        """The engine image's Config (entrypoint, environment, working directory)."""
        if self.kind != "engine":
            return {}
        return (engine.inspect(self.ref) or {}).get("Config") or {}

    def folder(self) -> Path:
        return convert.folder_of(self.name, self.digest)


def resolve(source: str) -> Foreign:
    """REF checked, nothing changed: an engine image inspected, an archive's manifest read
    (loaded() loads it), a SIF recognised and hashed."""
    if source.startswith("docker:"):
        ref = source.removeprefix("docker:")
        if ref and not TAG.fullmatch(ref):  # --privileged would be docker's option, not an image
            raise KitError(
                f"--image '{source}': '{ref}' is not an image reference (a name[:tag], an id); "
                "docker images lists them"
            )
        info = engine.inspect(ref) if ref else None
        if info is None:
            raise KitError(
                f"--image '{source}': no such image in the local Docker engine "
                "(docker images lists them; build or load it first)"
            )
        return Foreign(source, "engine", ref, info["Id"])
    path = Path(source).expanduser()
    if not path.is_file():
        raise KitError(f"--image '{source}' is not an image kit can read; give {FORMS}")
    with path.open("rb") as f:
        head = f.read(64)
    if SIF_MAGIC in head:
        return Foreign(source, "sif", str(path.resolve()), "sha256:" + sha256_of(path))
    if tarfile.is_tarfile(path):
        return _archive(source, path)
    raise KitError(f"--image '{source}' is neither a SIF nor a docker save archive; give {FORMS}")


def _archive(source: str, path: Path) -> Foreign:
    """A `docker save` archive, named by its first tag (else its id) as the engine will
    hold it once loaded(). Its manifest is checked as docker load reads it, so the dry run
    refuses a bogus one too."""
    not_saved = f"--image '{source}' is a tar file but not a docker save archive"
    try:
        with tarfile.open(path) as tar:
            names = set(tar.getnames())
            member = tar.extractfile("manifest.json")
            if member is None:
                raise KeyError("manifest.json")
            data = inputs.bounded(member, f"{not_saved}: its manifest.json", FIX, inputs.JSON_LIMIT)
    except (KeyError, tarfile.TarError):
        raise KitError(f"{not_saved} (no manifest.json)") from None
    manifest = inputs.loads(data, f"{not_saved}: its manifest.json", FIX)
    if why := _bogus(manifest, names):
        raise KitError(f"{not_saved}: its manifest.json {why}; {FIX}")
    tags = [t for entry in manifest for t in entry.get("RepoTags") or []]
    config = manifest[0]["Config"]
    image_id = "sha256:" + Path(config).stem.split("/")[-1].removesuffix(".json")
    return Foreign(source, "engine", tags[0] if tags else image_id, image_id)


def loaded(image: Foreign) -> Foreign:
    """The image in the engine: a docker save archive loaded (docker load of the same
    image again changes nothing), then an engine image like any other; any other as is."""
    if image.kind != "engine" or image.source.startswith("docker:"):
        return image
    path = Path(image.source).expanduser()
    said = capture([engine.docker(), "load", "--input", str(path)], "docker load")
    found = re.findall(r"Loaded image(?: ID)?: (\S+)", said)
    tagged = image.ref != image.digest  # _archive's name: its first tag, else its id
    ref = found[-1] if found and not tagged else image.ref
    info = engine.inspect(ref)
    if info is None:
        raise KitError(
            f"--image '{image.source}': docker load said {said.strip()!r}; no image found"
        )
    return dataclasses.replace(image, ref=ref, digest=info["Id"])


FIX = "give an archive `docker save` wrote"
TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")  # an image reference, as docker's


def _bogus(manifest: object, names: set[str]) -> str | None:
    """What in a docker save manifest docker load would refuse, or None: a list of images,
    each naming its config and layers, all in the archive, and its tags, if any."""
    if not isinstance(manifest, list) or not manifest:
        return "lists no image"
    for entry in manifest:
        if not isinstance(entry, dict) or not isinstance(entry.get("Config"), str):
            return "has an image without its config"
        layers, tags = entry.get("Layers"), entry.get("RepoTags") or []
        if not isinstance(layers, list) or not all(isinstance(x, str) for x in layers):
            return f"lists no layers of {entry['Config']}"
        if missing := [x for x in (entry["Config"], *layers) if x not in names]:
            return f"names {missing[0]}, which the archive does not hold"
        if not isinstance(tags, list) or not all(
            isinstance(t, str) and TAG.fullmatch(t) for t in tags
        ):
            return "has a tag that is not an image reference"
    return None


PROBE = """import importlib, json, sys
missing = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as e:
        missing.append(f"{name} ({type(e).__name__})")
print(json.dumps({"python": sys.executable, "missing": missing}))
"""


def with_benchmarks(image: Foreign, wanted: list[str], plan_only: bool = False) -> Foreign:
    """The image with kit's benchmarks added as one thin layer (COPY benchmarks/), when its
    Python imports what they need (checked by running its own python3); else a KitError
    naming what is missing. The layer is made once per image and benchmarks' content."""
    if image.kind != "engine":
        raise KitError(
            f"--bench with --image needs an engine image (docker:NAME:TAG or a docker save "
            f"archive), not '{image.source}': kit adds its benchmarks as a layer"
        )
    needs = list(dict.fromkeys(m for b in wanted for m in benches.get(b).needs))
    argv = [engine.docker(), "run", "--rm", "--entrypoint", "python3", "--network=none"]
    p = subprocess.run([*argv, image.ref, "-c", PROBE, *needs], capture_output=True, text=True)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        said = (p.stderr.strip().splitlines() or ["no output"])[-1][:200]
        raise KitError(
            f"--bench {','.join(wanted)} runs kit's Python benchmarks, but '{image.source}' "
            f"has no python3 that runs ({said})"
        )
    try:
        found = inputs.loads(lines[-1], "the probe's answer", "")
    except inputs.Unreadable:
        found = None
    if not isinstance(found, dict) or not isinstance(found.get("missing"), list):
        raise KitError(
            f"--bench {','.join(wanted)}: '{image.source}' answered kit's probe with "
            f"{lines[-1][:80]!r}, not its answer; check the image's python3"
        )
    if found["missing"]:
        raise KitError(
            f"--bench {','.join(wanted)} needs {', '.join(needs)} in the image; "
            f"'{image.source}' cannot import {', '.join(found['missing'])}"
        )
    source = repo_root() / "benchmarks"
    content = hashlib.sha256(image.digest.encode())
    for f in sorted(source.glob("*.py")):
        content.update(f.name.encode() + f.read_bytes())
    tag = f"kit-bench/{image.name}:{content.hexdigest()[:16]}"
    if not plan_only and engine.inspect(tag) is None:
        with tempfile.TemporaryDirectory() as ctx:
            shutil.copytree(
                source, Path(ctx) / "benchmarks", ignore=shutil.ignore_patterns("__pycache__")
            )
            (Path(ctx) / "Dockerfile").write_text(
                f"FROM {image.ref}\nCOPY benchmarks {BENCH_DIR}\n"
            )
            capture([engine.docker(), "build", "--quiet", "--tag", tag, ctx], "docker build")
            log.info(f"{image.source}: kit's benchmarks added as {tag}")
    digest = image.digest if plan_only else engine.image_id(tag)
    return dataclasses.replace(
        image, ref=tag, digest=digest, benchmarks=tuple(wanted), python=found["python"],
        version="foreign + kit benchmarks",
    )  # fmt: skip


def squashfs(image: Foreign) -> Path:
    """The image's root file system as a squashfs (Charliecloud's input; the file list
    MPI is read from): kit's own conversion of an engine image, a SIF's primary
    partition taken out of it."""
    if image.kind == "engine":
        return convert.convert(image, image.variant, ["squashfs"]).squashfs
    folder = image.folder()
    folder.mkdir(parents=True, exist_ok=True)
    marks.use(folder)  # for the rest of this kit's life: kit cache prune leaves it
    target = folder / "image.sqfs"
    with exclusive(folder / ".lock", f"the squashfs of {image.source}"):
        if not target.is_file():
            t0 = time.monotonic()
            apptainer = which("apptainer", convert.APPTAINER_FIX)
            listed = capture([apptainer, "sif", "list", image.ref], "apptainer sif list")
            ids = [
                line.split("|")[0].strip()
                for line in listed.splitlines()
                if "Squashfs" in line and "System" in line
            ]
            if not ids:
                raise KitError(
                    f"--image '{image.source}': the SIF has no squashfs system partition"
                )
            with made_whole(target) as part, part.open("wb") as out:
                p = subprocess.run([apptainer, "sif", "dump", ids[0], image.ref], stdout=out)
                if p.returncode != 0:
                    raise KitError(f"--image '{image.source}': apptainer sif dump failed")
            art = convert.Artifacts(image.digest, folder)
            convert.record_made(
                image, image.variant, art, {"squashfs": round(time.monotonic() - t0, 1)}
            )
    return target


def mpi_of(image: Foreign) -> tuple[Mpi, str] | None:
    """The MPI family the image's ranks would load, and the library file that says so, read
    from the squashfs's file list (no shell or Python needed in the image); None: no MPI."""
    cached = image.folder() / "mpi.json"
    known, found = _cached_mpi(cached)
    if not known:
        unsquashfs = which("unsquashfs", "install squashfs-tools (Debian package)")
        listed = capture([unsquashfs, "-l", "-n", str(squashfs(image))], "unsquashfs -l")
        found = mpi_in(line.removeprefix("squashfs-root") for line in listed.splitlines())
        write_atomically(cached, json.dumps(found or {}) + "\n")  # whole or not at all
    return (Mpi(found["flavour"], ""), found["library"]) if found else None


def _cached_mpi(path: Path) -> tuple[bool, dict | None]:
    """Whether mpi.json holds an answer, and the answer (None: no MPI, saved as {}). An
    absent or unreadable file, or one that is no such answer (half-written, altered), is
    a miss: the answer is derived again."""
    got = inputs.remade(path)
    if got == {}:
        return True, None
    mpi = isinstance(got, dict) and got.get("flavour") in FLAVOURS
    return bool(mpi and isinstance(got.get("library"), str)), got


def mpi_in(paths: Iterable[str]) -> dict[str, str] | None:
    """The MPI family of an image's file list and its library's path: the one family whose
    library is there or, with several, the one whose launcher is there too (else the first)."""
    libraries: dict[str, str] = {}
    launchers: set[str] = set()
    for path in paths:
        name = path.rsplit("/", 1)[-1]
        for pattern, flavour in MPI_LIBRARIES:
            if pattern.match(name):
                libraries.setdefault(flavour, path)
        launchers.update(flavour for pattern, flavour in MPI_LAUNCHERS if pattern.match(name))
    launched = [f for f in libraries if f in launchers]
    flavour = launched[0] if len(launched) == 1 else next(iter(libraries), None)
    return {"flavour": flavour, "library": libraries[flavour]} if flavour else None


def flavour_of_launcher(mpirun: str) -> str | None:
    """The MPI family of a host launcher, from its --version (Hydra is MPICH's)."""
    try:
        p = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    said = (p.stdout + p.stderr).lower()
    if "open mpi" in said or "open-mpi" in said or "openrte" in said:
        return "openmpi"
    if "hydra" in said or "mpich" in said:
        return "mpich"
    return None


def launcher_for(flavour: str) -> str:
    """The host launcher of a flavour (mpirun.mpich, mpirun.openmpi)."""
    return FLAVOURS[flavour].mpirun
