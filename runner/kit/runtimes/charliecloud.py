"""Charliecloud: runs the Shifter-format squashfs unprivileged, hybrid MPI model."""

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from kit.core.errors import KitError
from kit.image import convert, engine
from kit.image.recipes import Recipe
from kit.runtimes import base
from kit.runtimes.base import Job, Prepared, Runtime
from kit.runtimes.gpu import Access, with_host_driver

if TYPE_CHECKING:
    from kit.image.foreign import Foreign

# ch-run mounts onto folders the (read-only) squashfs already has; Debian's /mnt is one.
DATA_MOUNT = "/mnt"
MOUNT_POINT = "ch-mnt"  # beside the squashfs: where ch-run mounts it (see mounted)


def mounted(prep: Prepared) -> Prepared:
    """ch-run on a squashfs, mounted on a folder beside it that kit makes once. Its default
    (/var/tmp/$USER.ch/mnt) each ch-run makes as it starts, and ranks starting together on
    a node race for it: one fails with "can't mkdir: /var/tmp/USER.ch: File exists"
    (Debian's ch-run 0.31, seen across two nodes sharing /var/tmp). Each ch-run mounts in a
    mount namespace of its own, so the ranks can share the folder. The folder is the
    Prepared's only dir: exec_argv mounts on it."""
    folder = Path(prep.ref).with_name(MOUNT_POINT)
    folder.mkdir(exist_ok=True)
    return dataclasses.replace(prep, dirs=(str(folder),))


class Charliecloud(Runtime):
    name = "charliecloud"
    product = "Charliecloud"
    summary = "ch-run on the squashfs Shifter's image gateway would make"
    runs = "squashfs"
    host_list = True
    needs = ("engine", "squashfs", "fuse")
    tool = "ch-run"
    fix = "install charliecloud (Debian package), and make /dev/fuse usable"
    helpers = ("squashfuse", "squashfuse_ll")  # an external squashfs mount's FUSE daemon
    settings = (
        "ch-run on the squashfs that Shifter's image gateway would make (squashfuse mount)",
        base.UCX_SHM_NOTE,
        "hybrid MPI: the host's mpirun starts one ch-run per rank",
    )
    env = base.UCX_SHM
    gpu = Access(
        needs="ch-fromhost --nvidia, which copies the driver's libraries (as "
        "nvidia-container-cli lists them) into a directory copy of the image",
        tools=("ch-fromhost", "nvidia-container-cli", "unsquashfs"),
    )

    def prepare(self, recipe: Recipe, variant: str) -> Prepared:
        art = (
            None
            if engine.found(recipe.tag(variant))
            else convert.earlier(recipe, variant, self.runs)
        )
        art = art or convert.convert(recipe, variant, [self.runs])
        return mounted(base.in_image(str(art.squashfs), art.digest))

    def prepare_foreign(self, image: "Foreign") -> Prepared:
        """The squashfs (a SIF's own partition); ch-run passes its caller's environment
        in, so the image's own (PATH, ...) is the trial's, and Docker's working directory."""
        from kit.image import foreign

        prep = base.in_image(str(foreign.squashfs(image)), image.digest)
        config = image.config()
        env = tuple(tuple(e.split("=", 1)) for e in config.get("Env") or [] if "=" in e)
        workdir = config.get("WorkingDir")
        prep = dataclasses.replace(prep, env=env, options=(f"--cd={workdir}",) if workdir else ())
        return mounted(prep)

    def with_gpus(self, prep: Prepared, driver: str) -> Prepared:
        """ch-run has no GPU option: the driver's libraries go into the image itself, a
        directory copy of the squashfs (ch-run runs either)."""
        if not driver:
            raise KitError(
                "charliecloud takes the GPU node's driver libraries into the image on that "
                "node (ch-fromhost --nvidia), which kit cannot do from here; under Slurm or "
                "--hosts run a cuda variant with singularity (--nv)"
            )
        ref = with_host_driver(Path(prep.ref), driver)
        return dataclasses.replace(prep, ref=str(ref), dirs=())  # a folder: nothing to mount

    def exec_argv(self, prep: Prepared, job: Job) -> list[str]:
        mount = [f"--mount={folder}" for folder in prep.dirs]  # see mounted
        binds = [f"--bind={path}:{DATA_MOUNT}" for path in job.binds]
        argv = [self.tool, *mount, *prep.options, *binds, *job.extra, prep.ref]
        return [*argv, "--", *job.program]

    def data_path(self, host_path: str) -> str:
        return DATA_MOUNT
