"""`kit run --launcher slurm --emit DIR`: every trial's sbatch script, written in plan
order and not submitted, for sites that submit through their own tooling."""

from pathlib import Path

from kit.core.errors import KitError
from kit.image.recipes import Recipe
from kit.launch import launchers, slurm
from kit.run import campaign, trial
from kit.run.plan import Options, Planned
from kit.runtimes import Runtime


def emit(
    recipe: Recipe,
    variant: str,
    runtimes: list[Runtime],
    trials: list[Planned],
    folder: Path,
    opts: Options,
) -> list[Path]:
    """Write every trial's sbatch script to folder, in plan order, without submitting."""
    mpirun = campaign.mpirun_for(recipe, opts.mpirun)
    writer = launchers.Slurm(opts.site, recipe.mpi.flavour, folder)
    by_arm = {rt.arm: rt for rt in runtimes}
    driver = campaign.gpu_driver(variant, writer)
    prepared = {rt.arm: campaign.prepare(rt, recipe, variant, driver) for rt in runtimes}
    paths_out = []
    for i, p in enumerate(trials):
        rt, prep = by_arm[p.runtime], prepared[p.runtime]
        job = trial.trial_job(rt, prep, p.config, opts, mpirun, f"kit-{i:04d}", slurm.LAUNCH_ARG)
        path, _ = writer.write(rt, prep, job, trial.title(recipe, rt, job, p.config))
        paths_out.append(path)
    return paths_out


def check_folder(folder: Path) -> None:
    """Refuse a folder holding an earlier emission's scripts (a link named as one too): an
    emission of fewer trials left the rest beside the new ones, and `sbatch DIR/*.sbatch`
    submitted them all; a link was written through, to the file it names."""
    earlier = sorted(folder.glob("kit-*.sbatch")) if folder.is_dir() else []
    if earlier:
        raise KitError(
            f"--emit '{folder}' holds {len(earlier)} sbatch script(s) of an earlier emission "
            f"({earlier[0].name}, ...); remove them, or choose another folder"
        )
