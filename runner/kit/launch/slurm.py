"""Slurm: each trial as one batch job, from the same runtime adapters as local runs.

A trial becomes a self-contained sbatch script (allocation, the site's set-up
lines, the runtime's environment, one job step). `kit run --launcher slurm`
submits it, waits for the job (kit.launch.slurm_wait), and reads the benchmark's record
from the job's output file; `--emit DIR` only writes the scripts, for sites where kit cannot
submit. Ranks are started the way the MPI flavour supports under Slurm: MPICH
by `srun --mpi=pmi2` (PMI-2, one task per rank), Open MPI by its own `mpirun`
inside the allocation (Debian's Open MPI lacks Slurm's PMI support).
"""

import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kit.core import inputs, schema
from kit.core.errors import KitError
from kit.core.readers import BenchRecord, Reader, read_result
from kit.launch import outcomes, streams, supervise
from kit.runtimes import RUNTIMES, Job, Prepared, Runtime

# The benchmark's --launch-time is the job's start, not the submission (queue time
# is not start-up): the script sets it and the argv refers to it.
LAUNCH_VAR = "KIT_LAUNCH_TIME"
LAUNCH_ARG = "${" + LAUNCH_VAR + "}"


@dataclass(frozen=True)
class Site:
    """What a site adds to every job (from `--slurm-config FILE`, a TOML table [slurm])."""

    partition: str = ""
    account: str = ""
    time: str = "00:30:00"
    tasks_per_node: int = 0  # 0: every rank on one node
    options: tuple[str, ...] = ()  # more #SBATCH options, e.g. "--constraint=gpu"
    setup: tuple[str, ...] = ()  # shell lines before the step, e.g. "module load cray-mpich"
    mpi: str = ""  # srun's --mpi plugin (default by flavour) or "mpirun"
    runtime_options: tuple[tuple[str, object], ...] = ()  # keys runtimes declare, as set

    def option(self, name: str) -> object:
        """A runtime's site option: as the file sets it, else the runtime's default."""
        return dict(self.runtime_options).get(name, RUNTIME_OPTIONS[name].default)


# Site keys declared by the runtimes that read them (docker's allow_docker, ...).
RUNTIME_OPTIONS = {k: v for cls in RUNTIMES.values() for k, v in cls.site_options.items()}


SITE_FIELDS = {
    "partition": schema.Field(str, re.compile(r"[A-Za-z0-9_.,-]{0,64}")),
    "account": schema.Field(str, re.compile(r"[A-Za-z0-9_.-]{0,64}")),
    "time": schema.Field(str, re.compile(r"[0-9][0-9:-]{0,15}")),
    "tasks_per_node": schema.Field(int),
    "options": schema.Field(list, re.compile(r"-[^\x00-\x1f\x7f]{1,200}")),
    "setup": schema.Field(list, schema.TEXT),
    "mpi": schema.Field(str, re.compile(r"[a-z0-9_]{1,20}")),
    **{k: v.field for k, v in RUNTIME_OPTIONS.items()},
}


def load_site(path: Path | None) -> Site:
    """The site file's [slurm] table, checked key by key: nothing unknown, every value
    of its type, no value that could break or add a line of the batch script."""
    if path is None:
        return Site()
    where = f"--slurm-config {path}"
    data = inputs.read_toml(path, where, "give a TOML file with a [slurm] table", "a site file")
    unknown = sorted(set(data) - {"slurm"})
    if unknown:
        raise KitError(f"{where}: unknown table(s) {', '.join(unknown)}; kit reads [slurm]")
    table = schema.check_table(where, "slurm", data.get("slurm", {}), SITE_FIELDS)
    if table.get("tasks_per_node", 0) < 0:
        raise KitError(f"{where}: [slurm] tasks_per_node must be 0 (all on one node) or more")
    own = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
    declared = tuple((k, own.pop(k)) for k in RUNTIME_OPTIONS if k in own)
    return Site(**own, runtime_options=declared)


def launch(flavour: str, site: Site) -> str:
    """How ranks start: an srun --mpi plugin name, or "mpirun"."""
    return site.mpi or ("pmi2" if flavour == "mpich" else "mpirun")


def directives(job: Job, site: Site, output: Path, rt: Runtime, prep: Prepared) -> list[str]:
    per_node = site.tasks_per_node or job.ranks
    out = [
        f"--job-name={job.name}",
        f"--nodes={-(-job.ranks // per_node)}",
        f"--ntasks={job.ranks}",
        f"--ntasks-per-node={min(per_node, job.ranks)}",
        f"--time={site.time}",
        f"--output={output}",
        f"--error={errors(output)}",
    ]
    out += [f"--partition={site.partition}"] if site.partition else []
    out += [f"--account={site.account}"] if site.account else []
    return out + list(site.options) + rt.slurm_directives(prep, site)


def errors(output: Path) -> Path:
    """Where a job's standard error goes: a file of its own beside its output. In one file
    the launcher's forwarding of the ranks' two streams can land a line of stderr in the
    middle of the record's line (seen with Open MPI's mpirun under load), and the record
    is lost."""
    return output.with_suffix(".err")


def step(rt: Runtime, prep: Prepared, job: Job, site: Site, flavour: str) -> list[str]:
    how = launch(flavour, site)
    launcher = [job.mpirun, "-np", str(job.ranks)] if how == "mpirun" else ["srun", f"--mpi={how}"]
    return rt.slurm_step(prep, job, site, launcher)


def script(
    rt: Runtime,
    prep: Prepared,
    job: Job,
    site: Site,
    flavour: str,
    output: Path,
    title: str,
) -> str:
    """The whole sbatch script for one trial; readable, and runnable without kit."""
    lines = ["#!/bin/bash", f"# {title}"]
    lines += [f"#SBATCH {d}" for d in directives(job, site, output, rt, prep)]
    lines += ["set -euo pipefail", *site.setup]
    env = {**rt.env, **dict(prep.env), "KIT_TRIAL": job.name}
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    lines += [
        f"export {LAUNCH_VAR}=$(date +%s.%N)",
        'echo "kit-slurm: job ${SLURM_JOB_ID} nodes ${SLURM_JOB_NODELIST}" >&2',
        _shell(step(rt, prep, job, site, flavour)),
    ]
    return "\n".join(lines) + "\n"


def _shell(argv: list[str]) -> str:
    return " ".join(f'"{a}"' if a == LAUNCH_ARG else shlex.quote(a) for a in argv)


class JobOutput:
    """The script's line naming the job (`kit-slurm: job ID nodes LIST`, on the job's
    stderr), caught as it goes by (a long output's kept tail does not reach back to it)."""

    def __init__(self) -> None:
        self.job_id, self.nodes = "", ""

    def line(self, text: str) -> None:
        if text.startswith("kit-slurm: job "):
            _, _, self.job_id, _, self.nodes = text.split(maxsplit=4)

    def result(self) -> None:
        """It reads no result: the record is on the job's standard output."""
        return None


def submit(
    path: Path,
    output: Path,
    env: dict[str, str],
    timeout: float,
    name: str,
    read: Callable[[], Reader] | None = None,
):
    """Submit one trial's script, wait for the job, and read its record from its output
    (bounded as a local trial's is: streams.Capture)."""
    outcome = supervise.run(
        [sys.executable, "-m", "kit.launch.slurm_wait", str(path)],
        env,
        timeout,
        name,
        lambda: subprocess.run(["scancel", f"--name={name}"], capture_output=True),
    )
    record, job = (read or BenchRecord)(), JobOutput()
    text = streams.read_file(output, record).text()
    said = streams.read_file(errors(output), job).text()
    result, unread = read_result(record)
    status = outcome.status
    if status in ("ok", "failed"):
        status = "ok" if outcomes.ended_ok(outcome.exit_code, result, said) else "failed"
    both = f"{said}\n{text}"
    tail = outcomes.tail(outcome.output_tail + "\n" + both)
    return (
        outcomes.Outcome(
            status,
            outcome.exit_code,
            outcome.wall_s,
            result,
            tail,
            cause=(outcomes.cause(outcome.exit_code, both) or unread) if status == "failed" else "",
            output=""
            if status == "ok"
            else f"{outcome.output}\n== job stderr ==\n{said}\n== job output ==\n{text}",
        ),
        {"job_id": job.job_id, "nodes": job.nodes, "script": str(path)},
    )
