"""How a trial is started, apart from the runtime it runs in.

A runtime says what one rank (or, for Docker and Podman, the whole job) runs; a
launcher starts it: on this host (the flavour's mpirun for several ranks, or the
image's own inside one container), or as a Slurm batch job (srun, or mpirun inside
the allocation). The campaign takes any object with this interface, so its planning,
resume and status handling are tested with a launcher that starts nothing.
"""

import dataclasses
import functools
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kit.core.errors import KitError
from kit.core.proc import version_line
from kit.image.recipes import Recipe
from kit.launch import hosts, slurm, supervise
from kit.launch.hosts import HOSTS_LABEL
from kit.launch.outcomes import Outcome
from kit.runtimes import Job, Prepared, Runtime


@dataclass(frozen=True)
class Launched:
    argv: list[str]  # what was started (for Slurm: the sbatch command)
    outcome: Outcome
    job_info: dict | None = None  # Slurm: job id, nodes, script


class Launcher:
    """Starts one trial and waits for it; subclasses say how."""

    name = ""
    # its trials run on other machines: this host's GPUs and load say nothing of theirs
    elsewhere = False

    def check(self, recipe: Recipe, ranks: list[int], mpirun: str) -> None:
        """Raise a KitError naming the fix when the campaign's trials cannot start here."""

    def mpi_version(self, mpirun: str) -> str:
        """The MPI launcher's version, recorded with every trial of more than one rank."""
        if shutil.which(mpirun) is None:
            return "none"
        try:
            p = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return "unknown"
        return version_line(p.stdout or p.stderr)

    def launch_time(self, now: float) -> str:
        """The benchmark's --launch-time: when its command starts."""
        return f"{now:.6f}"

    def label(self, rt: Runtime, ranks: int) -> str:
        """How the trial's ranks were started, as its record says."""
        return rt.launcher(ranks)

    def check_prepared(self, rt: Runtime, prep: Prepared) -> None:
        """Raise a KitError naming the fix when a node lacks what rt runs (prepared here)."""

    def run(
        self, rt: Runtime, prep: Prepared, job: Job, env: dict[str, str], timeout: float, title: str
    ) -> Launched:
        raise NotImplementedError


class Local(Launcher):
    """On this host: the runtime's command, behind the flavour's mpirun for several ranks."""

    name = "local"

    def check(self, recipe: Recipe, ranks: list[int], mpirun: str) -> None:
        if any(n > 1 for n in ranks) and shutil.which(mpirun) is None:
            raise KitError(
                f"more than one rank needs '{mpirun}' on PATH; install "
                f"{recipe.mpi.spec.packages[0]} or pass --mpirun PATH"
            )

    def argv(self, rt: Runtime, prep: Prepared, job: Job, env: dict[str, str]) -> list[str]:
        """The command that starts the trial: the runtime's, behind mpirun for several ranks."""
        return rt.command(prep, job)

    def run(
        self, rt: Runtime, prep: Prepared, job: Job, env: dict[str, str], timeout: float, title: str
    ) -> Launched:
        argv = self.argv(rt, prep, job, env)
        cleanup = lambda: self.cleanup(rt, job)  # noqa: E731
        program = job.program if job.fingerprint else None
        outcome = supervise.run(
            argv, env, timeout, job.name, cleanup, job.read, job.watch_mpi, program, rt.helpers
        )
        return Launched(argv, outcome)

    def cleanup(self, rt: Runtime, job: Job) -> None:
        """Remove what the trial left (containers, mounts), once its processes are gone."""
        rt.cleanup(job)


class Torchrun(Local):
    """On this host, PyTorch's own launcher: one process (one container) runs torchrun,
    which starts the ranks beside each other and gives them their rendezvous (a free local
    port, --standalone), as PyTorch 2 users launch DDP; no MPI starts anything."""

    name = "torchrun"

    def check(self, recipe: Recipe, ranks: list[int], mpirun: str) -> None:
        """Nothing of the host's: torchrun comes with the image's (or native) PyTorch."""

    def mpi_version(self, mpirun: str) -> str:
        return "none (torchrun)"

    def label(self, rt: Runtime, ranks: int) -> str:
        return "torchrun"

    def run(
        self, rt: Runtime, prep: Prepared, job: Job, env: dict[str, str], timeout: float, title: str
    ) -> Launched:
        python, *script = job.program
        run = [python, "-m", "torch.distributed.run", "--standalone", "--nnodes=1"]
        program = [*run, f"--nproc-per-node={job.ranks}", *script]
        one = dataclasses.replace(job, program=program, ranks=1)  # one launch, N ranks
        return super().run(rt, prep, one, env, timeout, title)


class Hosts(Local):
    """On a host list over ssh, no scheduler (cloud VMs, a lab's nodes): the flavour's own
    launcher (MPICH's Hydra -hosts, Open MPI's -H) starts one rank per host in turn, each
    in the runtime there (the hybrid model: native, Apptainer, Charliecloud; an engine's
    container per rank: Podman, Docker)."""

    name = "hosts"
    elsewhere = True

    def __init__(self, names: tuple[str, ...], flavour: str) -> None:
        self.hosts, self.flavour = names, flavour

    def check(self, recipe: Recipe, ranks: list[int], mpirun: str) -> None:
        super().check(recipe, [2], mpirun)  # even one rank is started on the first host
        for host in self.hosts:
            hosts.reach(host)

    def check_prepared(self, rt: Runtime, prep: Prepared) -> None:
        """As Launcher's; and the folders its ranks need are made on each host."""
        if rt.pmi_port and self.flavour != "mpich":
            raise KitError(
                f"runtime '{rt.arm}' under --hosts runs MPICH images (Hydra gives each rank's "
                f"container a TCP port to reach it on); this image's ranks use {self.flavour}"
                ": run it under singularity or charliecloud there"
            )
        if rt.engine_id:
            self._own_engines(rt)
        identity = rt.identity(prep)
        if identity is None:
            return
        asked, here = shlex.join(identity), hosts.answer(identity)
        for host in self.hosts:
            if not hosts.holds(host, identity, here):
                raise KitError(
                    f"host '{host}' lacks what runtime '{rt.arm}' runs here ('{asked}' answers "
                    "otherwise there); make it there the same way (kit convert, the first "
                    "native run, podman load), or share the folder with the nodes"
                )
            hosts.make_dirs(host, prep.dirs)

    def _own_engines(self, rt: Runtime) -> None:
        """Each host must answer from an engine of its own: one engine's containers run in
        its namespaces, not those of the host whose launcher started the rank."""
        ids = hosts.engines(self.hosts, rt.engine_id)
        seen: dict[str, str] = {}
        for host, engine_id in ids.items():
            if not engine_id:
                raise KitError(
                    f"host '{host}': {rt.service} does not answer there ('"
                    f"{shlex.join(rt.engine_id)}' failed); start it there, or leave runtime "
                    f"'{rt.arm}' out"
                )
            if first := seen.get(engine_id):
                raise KitError(
                    f"runtime '{rt.arm}' under --hosts needs an engine on each host; '{first}' "
                    f"and '{host}' answer from the same one ({engine_id[:24]}), whose containers "
                    "run in its own namespaces, not the hosts': use podman, or a hybrid runtime"
                )
            seen[engine_id] = host

    def label(self, rt: Runtime, ranks: int) -> str:
        return HOSTS_LABEL

    @functools.cached_property
    def route(self) -> tuple[str, str]:
        """The interface here that routes to the hosts, and its network (found once)."""
        iface = hosts.interface(self.hosts[0])
        return iface, hosts.subnet(iface)

    @functools.cached_property
    def source(self) -> str:
        """This host's address on that route (found once)."""
        return hosts.source(self.hosts[0])

    def argv(self, rt: Runtime, prep: Prepared, job: Job, env: dict[str, str]) -> list[str]:
        exported = sorted({*rt.env, *dict(prep.env), "KIT_TRIAL"} & env.keys())
        via = self.source if rt.pmi_port else None
        pmix = tuple((k, env[k]) for k in exported if k.startswith("PMIX_MCA_"))
        launch = hosts.launcher_argv(
            self.flavour, job.mpirun, self.hosts, job.ranks, self.route, exported, via, pmix
        )
        return [*launch, *rt.exec_argv(prep, job)]

    def cleanup(self, rt: Runtime, job: Job) -> None:
        """As locally, and what the ranks left on the hosts is removed there."""
        rt.cleanup(job)
        if left := rt.leftovers(job):
            hosts.clear(self.hosts, left)


class Slurm(Launcher):
    """One batch job a trial: its script written to folder, submitted, waited for."""

    name = "slurm"
    elsewhere = True

    def __init__(self, site: slurm.Site, flavour: str, folder: Path) -> None:
        self.site, self.flavour, self.folder = site, flavour, folder

    def check(self, recipe: Recipe, ranks: list[int], mpirun: str) -> None:
        for tool in ("sbatch", "scontrol"):
            if shutil.which(tool) is None:
                raise KitError(
                    f"--launcher slurm needs '{tool}' on PATH (a Slurm client); or use --emit DIR"
                )

    def launch_time(self, now: float) -> str:
        return slurm.LAUNCH_ARG  # the job's start, set by the script, not the submission

    def label(self, rt: Runtime, ranks: int) -> str:
        return "slurm"

    def write(self, rt: Runtime, prep: Prepared, job: Job, title: str) -> tuple[Path, Path]:
        """The trial's sbatch script in the folder; its path and its job's output file."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{job.name}.sbatch"
        output = (self.folder / f"{job.name}.out").resolve()
        path.write_text(slurm.script(rt, prep, job, self.site, self.flavour, output, title))
        return path, output

    def run(
        self, rt: Runtime, prep: Prepared, job: Job, env: dict[str, str], timeout: float, title: str
    ) -> Launched:
        path, output = self.write(rt, prep, job, title)
        outcome, job_info = slurm.submit(path, output, env, timeout, job.name, job.read)
        return Launched(["sbatch", str(path)], outcome, job_info)
