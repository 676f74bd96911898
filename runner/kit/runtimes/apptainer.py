"""Apptainer (Singularity): the SIF converted from the Docker image, hybrid MPI model.

Without a local image (a cluster with no Docker), the SIF made by `kit pull` is used.
"""

import dataclasses
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from kit.core.errors import KitError
from kit.core.paths import cache_dir
from kit.image import convert, engine, pull
from kit.image.recipes import Recipe
from kit.runtimes import base
from kit.runtimes.base import Job, Prepared, Runtime
from kit.runtimes.gpu import Access

if TYPE_CHECKING:
    from kit.image.foreign import Foreign


class Apptainer(Runtime):
    name = "singularity"
    product = "Apptainer"
    aliases = ("apptainer",)
    summary = "Apptainer (Singularity) on the SIF converted from the image"
    runs = "singularity"
    host_list = True
    needs = ("engine", "squashfs", "fuse")
    tool = "apptainer"
    fix = convert.APPTAINER_FIX
    # the SIF's squashfs and overlay mounts, FUSE daemons once they leave its process
    helpers = ("squashfuse", "squashfuse_ll", "fuse-overlayfs", "fuse2fs")
    gpu = Access(
        ("--nv",),
        "nvidia-smi and the driver's libraries, which --nv binds (its nvliblist.conf)",
        tools=("nvidia-smi",),
    )
    settings = (
        "apptainer exec with its default binds ($HOME, /tmp, $PWD) and host network",
        base.UCX_SHM_NOTE,
        "hybrid MPI: the host's mpirun starts one apptainer per rank",
    )
    env = base.UCX_SHM

    def prepare(self, recipe: Recipe, variant: str) -> Prepared:
        if engine.found(recipe.tag(variant)):
            art = convert.convert(recipe, variant, [self.runs])
            return base.in_image(str(art.sif), art.digest)
        if art := convert.earlier(recipe, variant, self.runs):
            return base.in_image(str(art.sif), art.digest)
        got = pull.pulled(recipe, variant)
        if got is None:
            raise KitError(
                f"no local image {recipe.tag(variant)} and no pulled SIF; build it "
                f"(kit build {recipe.name}) or fetch a published one "
                f"(kit pull {recipe.name} --ref REGISTRY/OWNER/kit-{recipe.name}:"
                f"{recipe.version}-{variant})"
            )
        return base.in_image(str(got.sif), got.digest)

    def prepare_foreign(self, image: "Foreign") -> Prepared:
        if image.kind == "sif":
            return base.in_image(image.ref, image.digest)
        art = convert.convert(image, image.variant, [self.runs])
        # the image's working directory, as Docker starts there (Apptainer: the caller's)
        workdir = image.config().get("WorkingDir")
        return dataclasses.replace(
            base.in_image(str(art.sif), art.digest),
            options=(f"--pwd={workdir}",) if workdir else (),
        )

    def exec_argv(self, prep: Prepared, job: Job) -> list[str]:
        binds = [f"--bind={path}" for path in job.binds]
        return [self.tool, "exec", *prep.options, *binds, *job.extra, prep.ref, *job.program]


HOST_MPI = "/opt/kit/host-mpi"  # where the bind model puts the host's MPI library


def staged(library: str) -> str:
    """A copy of the host library in kit's cache, named by its content, bound from there:
    the path is then visible wherever Apptainer runs (also in a mount namespace of its
    own, as on the test machines), and the record's settings name the exact file."""
    data = Path(library).read_bytes()
    folder = cache_dir() / "host-mpi" / hashlib.sha256(data).hexdigest()[:16]
    copy = folder / Path(library).name
    if not copy.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        part = copy.with_suffix(".part")
        part.write_bytes(data)
        part.replace(copy)
    return str(copy)


def host_library(soname: str) -> str:
    """The host's file for a shared library soname (from the linker cache)."""
    # ldconfig lives in /sbin, off an ordinary user's PATH on Debian
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        cache = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout
    except OSError:
        cache = ""
    for line in cache.splitlines():
        name, _, path = line.strip().partition(" => ")
        if name.split(" ", 1)[0] == soname:
            return os.path.realpath(path)
    raise KitError(
        f"runtime 'singularity-bind' needs the host's {soname} (the image's MPI flavour); "
        "install the flavour's MPI on the host, or use the hybrid runtime 'singularity'"
    )


class ApptainerBind(Apptainer):
    """Bind model: the host's MPI library replaces the image's at run time (the way
    sites inject a vendor MPI, e.g. Cray MPICH, into MPICH-ABI images); the rest of
    the image is unchanged and the host's mpirun or srun starts the ranks."""

    name = "singularity-bind"
    aliases = ("apptainer-bind",)
    summary = "the same SIF with the host's MPI library bound in (bind model)"
    needs = (*Apptainer.needs, "mpich")
    settings = (
        *Apptainer.settings[:2],
        "bind model: the host's MPI library bound into the container at "
        f"{HOST_MPI} (read-only) and put first on LD_LIBRARY_PATH",
    )

    def prepare(self, recipe: Recipe, variant: str) -> Prepared:
        soname = recipe.mpi.spec.library
        host = host_library(soname)
        library = staged(host)
        return dataclasses.replace(
            super().prepare(recipe, variant),
            settings=(f"injected: {host} (staged as {library})",),
            options=inject(library, soname),
            files=(library,),
        )


def inject(library: str, soname: str) -> tuple[str, ...]:
    """Apptainer options that put the host's library first for the image's soname."""
    return (f"--bind={library}:{HOST_MPI}/{soname}:ro", f"--env=LD_LIBRARY_PATH={HOST_MPI}")
