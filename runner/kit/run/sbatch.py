"""`kit run --launcher slurm --emit DIR`: every trial's sbatch script, written in plan
order and not submitted, for sites that submit through their own tooling."""

from pathlib import Path

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
