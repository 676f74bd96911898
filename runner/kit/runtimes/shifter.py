"""Shifter: command lines only; no Shifter binary can be installed on these machines.

The image it would load is made by `kit convert --to shifter` (squashfs plus
metadata, and the `docker save` tar for `shifter load`) and is what the
charliecloud runtime runs here.
"""

import re

from kit.core import schema
from kit.image import engine
from kit.image.recipes import Recipe
from kit.runtimes import base
from kit.runtimes.base import Job, Prepared, Runtime, SiteOption
from kit.runtimes.gpu import Access


class Shifter(Runtime):
    name = "shifter"
    product = "Shifter"
    summary = "command lines for a site's Shifter (not installable here)"
    runs = "shifter"
    tool = "shifter"
    version_argv = ("--help",)
    site_options = {  # noqa: RUF012
        "shifter": SiteOption(
            schema.Field(str, re.compile("nersc|cscs")),
            "nersc",
            "nersc: #SBATCH --image and `shifter`; cscs: `shifter run --mpi`",
        )
    }
    fix = (
        "Shifter is a site install (not packaged for Debian); on this machine "
        "the charliecloud runtime runs the same squashfs"
    )
    gpu = Access(
        ("--module=gpu",),
        "the site's Shifter gpu module (NERSC's form), which binds the node's driver",
        libraries=(),
    )
    settings = ("shifter --image=docker:TAG, hybrid MPI: the host launcher starts ranks",)

    def prepare(self, recipe: Recipe, variant: str) -> Prepared:
        tag = recipe.tag(variant)
        return base.in_image(tag, engine.image_id(tag))

    def slurm_directives(self, prep: Prepared, site) -> list[str]:
        """NERSC: the job names its image; Slurm's Shifter plugin sets it up on each node."""
        return [f"--image=docker:{prep.ref}"] if site.option("shifter") == "nersc" else []

    def slurm_exec(self, prep: Prepared, job: Job, site) -> list[str]:
        if site.option("shifter") == "nersc":  # the image comes from #SBATCH --image
            volumes = [f"--volume={path}:{path}" for path in job.binds]
            return [self.tool, *prep.options, *volumes, *job.extra, *job.program]
        # CSCS: an image loaded with `shifter load image.tar TAG`, and the site's MPI
        # swapped in for the image's (ABI-compatible MPICH) by --mpi
        mounts = [f"--mount=type=bind,source={p},destination={p}" for p in job.binds]
        return [
            self.tool,
            "run",
            "--mpi",
            *prep.options,
            *mounts,
            *job.extra,
            f"load/library/{prep.ref}",
            *job.program,
        ]

    def exec_argv(self, prep: Prepared, job: Job) -> list[str]:
        binds = [f"--volume={path}:{path}" for path in job.binds]
        image = f"--image=docker:{prep.ref}"
        return [self.tool, image, *prep.options, *binds, *job.extra, "--", *job.program]
