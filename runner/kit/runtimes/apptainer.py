"""Apptainer (Singularity): the SIF converted from the Docker image, hybrid MPI model."""

from .. import convert
from ..recipes import Recipe
from . import base
from .base import Job, Prepared, Runtime


class Apptainer(Runtime):
    name = "singularity"
    tool = "apptainer"
    fix = "install Apptainer (on this kind of machine: ci/provision)"
    settings = (
        "apptainer exec with its default binds ($HOME, /tmp, $PWD) and host network",
        base.UCX_SHM_NOTE,
        "hybrid MPI: the host's mpirun starts one apptainer per rank",
    )
    env = base.UCX_SHM

    def prepare(self, recipe: Recipe, variant: str) -> Prepared:
        art = convert.convert(recipe, variant, ["singularity"])
        return Prepared(str(art.sif), art.digest, base.IMAGE_PYTHON, base.IMAGE_BENCH)

    def exec_argv(self, prep: Prepared, job: Job) -> list[str]:
        return [self.tool, "exec", *job.extra, prep.ref, *job.program]
