"""Apptainer (Singularity): the SIF converted from the Docker image, hybrid MPI model.

Without a local image (a cluster with no Docker), the SIF made by `kit pull` is used.
"""

from .. import convert, engine, pull
from ..errors import KitError
from ..recipes import Recipe
from . import base
from .base import Job, Prepared, Runtime


class Apptainer(Runtime):
    name = "singularity"
    tool = "apptainer"
    fix = convert.APPTAINER_FIX
    settings = (
        "apptainer exec with its default binds ($HOME, /tmp, $PWD) and host network",
        base.UCX_SHM_NOTE,
        "hybrid MPI: the host's mpirun starts one apptainer per rank",
    )
    env = base.UCX_SHM

    def prepare(self, recipe: Recipe, variant: str) -> Prepared:
        if engine.has_image(recipe.tag(variant)):
            art = convert.convert(recipe, variant, ["singularity"])
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

    def exec_argv(self, prep: Prepared, job: Job) -> list[str]:
        binds = [f"--bind={path}" for path in job.binds]
        return [self.tool, "exec", *binds, *job.extra, prep.ref, *job.program]
