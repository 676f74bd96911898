"""NVIDIA GPUs: what the host has, and how each runtime passes them into its containers.

A cuda variant's trials need a GPU on the host; each runtime declares its own way in
(Runtime.gpu: its options and what the host needs for them), and `kit doctor` shows
both. Only these decisions live here; nothing is tried on a host without a GPU, where
a cuda campaign stops before its first trial with one line.
"""

import contextlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.paths import exclusive, write_atomically
from kit.core.proc import stream

QUERY = (
    "nvidia-smi",
    "--query-gpu=index,name,driver_version,compute_cap",
    "--format=csv,noheader",
)
CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))  # where CDI consumers look for specs
CDI_GPUS = "nvidia.com/gpu"  # the CDI kind NVIDIA's toolkit writes

log = logger(__name__)


@dataclass(frozen=True)
class Device:
    index: str
    name: str
    driver: str
    compute: str  # compute capability, e.g. 9.0


def parse(text: str) -> list[Device]:
    """nvidia-smi's CSV rows (QUERY) as devices."""
    rows = [[f.strip() for f in line.split(",")] for line in text.splitlines() if line.strip()]
    return [Device(*row[:4]) for row in rows if len(row) >= 4]


def devices() -> tuple[list[Device], str]:
    """The host's GPUs, and when there are none, why (for one line)."""
    if shutil.which(QUERY[0]) is None:
        return [], "nvidia-smi is not on PATH"
    try:
        p = subprocess.run(QUERY, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return [], f"nvidia-smi did not answer ({e.__class__.__name__})"
    found = parse(p.stdout) if p.returncode == 0 else []
    last = (p.stderr or p.stdout).strip().splitlines()
    return found, "" if found else f"nvidia-smi: {last[-1] if last else 'no GPU listed'}"


def require(variant: str) -> list[Device]:
    """The GPUs a variant's trials use (none for a CPU variant); a KitError when a cuda
    variant is asked for on a host without one."""
    if variant != "cuda":
        return []
    found, why = devices()
    if not found:
        raise KitError(
            f"--variant cuda runs on NVIDIA GPUs and this host shows none ({why}); run "
            "--variant cpu here, or run on a GPU node (kit doctor lists what each runtime "
            "needs there)"
        )
    return found


def cdi_specs() -> list[Path]:
    """CDI spec files that name NVIDIA's GPUs (Podman's and Docker's --device source);
    one this user cannot read counts as absent."""
    found = []
    for d in CDI_DIRS:
        with contextlib.suppress(OSError):
            for f in sorted(d.iterdir()) if d.is_dir() else []:
                text = f.read_text(errors="replace") if f.suffix in SPEC_SUFFIXES else ""
                if CDI_GPUS in text:
                    found.append(f)
    return found


SPEC_SUFFIXES = (".yaml", ".yml", ".json")
LDCONFIG = ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig")  # /sbin: not on a user's PATH


def has_library(soname: str) -> bool:
    """Whether the dynamic linker's cache knows soname (the driver's libcuda.so.1)."""
    tool = next((t for t in LDCONFIG if shutil.which(t)), None)
    if tool is None:
        return False
    try:
        p = subprocess.run([tool, "-p"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return any(line.strip().startswith(soname + " ") for line in p.stdout.splitlines())


@dataclass(frozen=True)
class Access:
    """How a runtime passes the host's GPUs in: its options, and what the host needs."""

    options: tuple[str, ...] = ()  # before the image, in every GPU trial
    needs: str = ""  # in words, for kit doctor
    tools: tuple[str, ...] = ()  # commands it needs on PATH
    libraries: tuple[str, ...] = ("libcuda.so.1",)  # the driver's, in ldconfig's cache
    cdi: bool = False  # a CDI spec of the GPUs

    def missing(self) -> list[str]:
        """What of its needs this host lacks (empty: ready)."""
        lacks = [f"{t} (not on PATH)" for t in self.tools if shutil.which(t) is None]
        lacks += [f"{s} (not in ldconfig's cache)" for s in self.libraries if not has_library(s)]
        if self.cdi and not cdi_specs():
            lacks.append(f"a CDI spec of {CDI_GPUS} in {' or '.join(map(str, CDI_DIRS))}")
        return lacks


def injected_argv(image_dir: Path) -> list[str]:
    """Charliecloud's way: the host's driver libraries copied into a directory image."""
    return ["ch-fromhost", "--nvidia", str(image_dir)]


def unpacked_argv(squashfs: Path, image_dir: Path) -> list[str]:
    return ["unsquashfs", "-no-progress", "-quiet", "-d", str(image_dir), str(squashfs)]


def with_host_driver(squashfs: Path, driver: str) -> Path:
    """A writable directory copy of the squashfs with this host's driver libraries in it
    (ch-fromhost --nvidia), made once per image and driver version beside the squashfs:
    the libraries must match the running kernel module, so a new driver gets a new copy."""
    image_dir = squashfs.parent / f"nvidia-{driver}"
    with exclusive(image_dir.with_name(f".{image_dir.name}.lock"), f"the GPU image {image_dir}"):
        stamp = image_dir.with_name(f".{image_dir.name}.done")
        if not stamp.is_file():
            shutil.rmtree(image_dir, ignore_errors=True)
            log.info(f"charliecloud: injecting driver {driver} into {image_dir}")
            stream(unpacked_argv(squashfs, image_dir), "unsquashfs (GPU image)")
            stream(injected_argv(image_dir), "ch-fromhost --nvidia")
            write_atomically(stamp, driver + "\n")  # never a stamp without its driver
    return image_dir
