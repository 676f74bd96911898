"""The interface every runtime adapter implements."""

import dataclasses
import getpass
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kit.core import schema
from kit.core.errors import KitError
from kit.image import convert
from kit.image.blocks import BENCH_DIR as IMAGE_BENCH
from kit.image.blocks import PYTHON as IMAGE_PYTHON
from kit.image.recipes import Recipe
from kit.runtimes.gpu import Access

if TYPE_CHECKING:
    from kit.core.readers import Reader
    from kit.image.foreign import Foreign

__all__ = ["Job", "Prepared", "Runtime", "in_image"]


@dataclass(frozen=True)
class Prepared:
    """What a runtime runs: an image reference (tag, SIF, squashfs) or the native python,
    and what preparing it decided for this image (the runtime object itself stays as
    declared, so one adapter can prepare several images)."""

    ref: str
    digest: str
    python: str
    bench_dir: str
    env: tuple[tuple[str, str], ...] = ()  # more environment for its trials
    settings: tuple[str, ...] = ()  # more fair settings, shown in the report
    options: tuple[str, ...] = ()  # runtime options before the user's (e.g. a bound library)
    files: tuple[str, ...] = ()  # host files its ranks bind in: every host needs the same
    dirs: tuple[str, ...] = ()  # folders its ranks need on every host (kit makes them)


def in_image(ref: str, digest: str) -> Prepared:
    """A container image: the benchmarks run with the image's own python and copies."""
    return Prepared(ref, digest, IMAGE_PYTHON, IMAGE_BENCH)


@dataclass(frozen=True)
class SiteOption:
    """A key a runtime reads from the Slurm site file (--slurm-config), and its default."""

    field: schema.Field
    default: object
    help: str


@dataclass(frozen=True)
class Job:
    """One launch: the program (python script and its arguments) on a number of ranks."""

    program: list[str]
    ranks: int
    mpirun: str
    name: str  # unique per trial: container names and clean-up markers use it
    extra: list[str] = field(default_factory=list)  # user pass-through options
    binds: tuple[str, ...] = ()  # host folders the program reads, at the same path inside
    # makes the reader of one trial's output (None: the kit benchmark's JSON line); a str
    # its result() returns says why there is none
    read: Callable[[], "Reader"] | None = None
    watch_mpi: bool = False  # record which MPI library files its ranks map (they do not say)
    # fingerprint its first rank from the host (a user's command: its image need hold no
    # Python, and none of kit's files)
    fingerprint: bool = False


def mpirun(job: Job) -> list[str]:
    """The launcher prefix: nothing for one rank, the flavour's mpirun for more."""
    return [job.mpirun, "-np", str(job.ranks)] if job.ranks > 1 else []


def one_container(head: list[str], prep: Prepared, job: Job) -> list[str]:
    """An engine's `run` command (head: the engine's own options) for a whole job: the
    image's own mpirun starts the ranks inside one container, which gets the trial's
    marker, the data folders at the same paths and the workload's tuning variables."""
    argv = [*head, "-e", "HOME=/tmp", "-e", "KIT_TRIAL"]  # kit finds (and names) ranks inside
    argv += [f"--volume={path}:{path}" for path in job.binds] + list(prep.options)
    for k in user_env():
        if k.startswith(WORKLOAD_PREFIXES):
            argv += ["-e", k]
    inside = dataclasses.replace(job, mpirun="mpirun")  # the image's own flavour
    return [*argv, *job.extra, prep.ref, *mpirun(inside), *job.program]


TRIAL_LABEL = "kit.trial"  # on every container of a trial's ranks under --hosts
# what MPICH's Hydra gives a rank under -pmi-port (its proxy's address, the rank's id,
# its place on the host), passed by name into the rank's container
PMI_PORT_ENV = ("PMI_PORT", "PMI_ID", "MPI_LOCALNRANKS", "MPI_LOCALRANKID")
PMI_PORT_ENV += ("MPIR_CVAR_CH3_INTERFACE_HOSTNAME",)


def rank_container(head: list[str], prep: Prepared, job: Job) -> list[str]:
    """An engine's `run` command (head: the engine, `run` and how it maps the caller's
    user) for one rank of a job whose host launcher starts a container per rank (under
    --hosts): the host's network, IPC and process namespaces, MPICH's variables for a rank
    that reaches its launcher over TCP plus the world's size (which Hydra gives such a
    rank only through PMI), UCX's settings for ranks in separate containers, labelled
    with the trial for clean-up."""
    argv = [*head, "--rm", f"--label={TRIAL_LABEL}={job.name}"]
    argv += ["--network=host", "--ipc=host", "--pid=host"]
    argv += ["-e", "HOME=/tmp", "-e", "KIT_TRIAL", f"--env=PMI_SIZE={job.ranks}"]
    argv += [x for k in PMI_PORT_ENV for x in ("-e", k)]
    argv += [f"--env={k}={v}" for k, v in UCX_SHM.items()]
    argv += [f"--volume={path}:{path}" for path in job.binds] + list(prep.options)
    argv += [x for k in user_env() if k.startswith(WORKLOAD_PREFIXES) for x in ("-e", k)]
    return [*argv, *job.extra, prep.ref, *job.program]


@dataclass(frozen=True)
class Leftovers:
    """What a trial's ranks may leave on a host (containers whose client was killed, e.g.
    at a timeout): `find` prints their ids, one a line; `remove` plus the ids removes them."""

    find: list[str]
    remove: list[str]


def rank_containers(tool: str, job: Job) -> Leftovers:
    """A trial's rank containers (rank_container), found by their label."""
    label = f"label={TRIAL_LABEL}={job.name}"
    return Leftovers([tool, "ps", "--all", "--quiet", "--filter", label], [tool, "rm", "--force"])


def tool_version(argv: list[str]) -> str:
    """The first line a tool prints about its version, or "unknown"."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return "unknown"
    lines = (p.stdout or p.stderr).strip().splitlines()
    return lines[0].strip() if lines else "unknown"


class Runtime:
    """A way to run the benchmark: natively or in one container runtime.

    A subclass declares everything the rest of kit needs to know about it (its names,
    what it runs, the host components it needs, its fair settings) and is found by
    the registry in kit.runtimes without being listed anywhere. Hybrid runtimes (the
    default) are started once per rank by the host's mpirun; a runtime whose ranks
    share one container started by the image's own mpirun sets ranks_inside.
    """

    name = ""
    aliases: tuple[str, ...] = ()  # other names users may pass to --runtime
    product = ""  # the container runtime's own name, as `kit --help` lists it ("": native)
    summary = ""  # one line for --help and `kit doctor`
    runs = ""  # what it runs: the `kit convert` format it converts to and runs, "engine" (the
    # local image) or "host"
    needs: tuple[str, ...] = ()  # host components from kit.doctor.COMPONENTS, beside its tool
    arm = ""  # what results call it: the name, or NAME@LABEL for a second arm
    tool = ""  # the command it needs on PATH
    fix = ""  # how to get that command
    version_argv: tuple[str, ...] = ("--version",)  # tool options that print its version
    settings: tuple[str, ...] = ()  # fair defaults it applies, shown in the report
    env: dict[str, str] = {}  # noqa: RUF012  (read-only) extra environment for its trials
    ranks_inside = False  # ranks started inside one container by the image's own mpirun
    host_list = False  # runs under --hosts: ranks started on each host from what kit checks
    pmi_port = False  # under --hosts its ranks reach MPICH's launcher over TCP (no fd inherited)
    engine_id: tuple[str, ...] = ()  # under --hosts: prints its engine's id, unique to a host
    site_options: dict[str, SiteOption] = {}  # noqa: RUF012  (read-only) its --slurm-config keys
    client_env: tuple[str, ...] = ()  # host settings its client reads (which engine, where)
    service = ""  # a service its trials need beside the tool ("the Docker engine")
    service_lost: tuple[str, ...] = ()  # what its client says when that service is gone
    gpu = Access()  # how it passes the host's GPUs in (a cuda variant's trials)
    # the processes that do its work for a trial without being the trial's (an engine, a
    # shim, conmon, a FUSE or user-mode network daemon), by name as /proc/PID/stat gives it
    # (15 characters at most): their CPU during a trial is the runtime's own, recorded
    # apart (host_load's helper_cpu_pct), never outside load (kit.launch.proctree.Tree)
    helpers: tuple[str, ...] = ()

    @classmethod
    def client(cls) -> str:
        """The command kit calls on this host for this runtime: its tool, as PATH finds it,
        unless the runtime picks its client itself (Docker's); `kit doctor` checks this one."""
        return cls.tool

    def check(self) -> None:
        """Raise a KitError naming the fix when this runtime cannot run here."""
        if shutil.which(self.client()) is None:
            raise KitError(f"runtime '{self.name}' needs '{self.client()}' on PATH; {self.fix}")

    def version(self) -> str:
        return tool_version([self.client(), *self.version_argv])

    def client_settings(self) -> dict[str, str]:
        """The host's settings of its client (e.g. DOCKER_HOST), for the client that starts
        a trial to talk to the engine kit checked and prepared with; they do not enter
        the container."""
        return {k: os.environ[k] for k in self.client_env if k in os.environ}

    def prepare(self, recipe: Recipe, variant: str) -> Prepared:
        raise NotImplementedError

    def prepare_foreign(self, image: "Foreign") -> Prepared:
        """What it runs of an image kit did not build (kit run --image)."""
        raise KitError(
            f"runtime '{self.name}' does not run --image yet; use docker, podman, "
            "singularity, charliecloud or native (with --native-command)"
        )

    def identity(self, prep: Prepared) -> list[str] | None:
        """A command whose output names what it runs (by default the conversion's manifest,
        with the image's digest, and the host files it binds in, by content), which every
        host must print alike under --hosts."""
        manifest = Path(prep.ref).with_name(convert.MANIFEST)
        if not manifest.is_file():
            return None
        return ["sha256sum", str(manifest), *prep.files] if prep.files else ["cat", str(manifest)]

    def leftovers(self, job: Job) -> Leftovers | None:
        """What a trial's ranks may leave on each host under --hosts; None: nothing
        outlives them."""
        return None

    def with_gpus(self, prep: Prepared, driver: str) -> Prepared:
        """What it runs when the trials use the host's GPUs (driver: its version)."""
        return dataclasses.replace(prep, options=(*prep.options, *self.gpu.options))

    def exec_argv(self, prep: Prepared, job: Job) -> list[str]:
        """The command that starts one rank of the job in this runtime."""
        raise NotImplementedError

    def slurm_directives(self, prep: Prepared, site) -> list[str]:
        """#SBATCH options this runtime needs (Shifter's image, NERSC form)."""
        return []

    def slurm_exec(self, prep: Prepared, job: Job, site) -> list[str]:
        """One rank inside a Slurm job (by default as under a local mpirun)."""
        return self.exec_argv(prep, job)

    def slurm_step(self, prep: Prepared, job: Job, site, launcher: list[str]) -> list[str]:
        """The job step: the launcher (srun --mpi=..., or mpirun -np N) starts each rank."""
        return [*launcher, *self.slurm_exec(prep, job, site)]

    def data_path(self, host_path: str) -> str:
        """Where a host folder in Job.binds appears to the program (the same path,
        unless the runtime can only mount onto folders the image already has)."""
        return host_path

    def command(self, prep: Prepared, job: Job) -> list[str]:
        return mpirun(job) + self.exec_argv(prep, job)

    def launcher(self, ranks: int) -> str:
        """How ranks are started, as recorded with each trial."""
        if ranks == 1:
            return "plain"
        return "mpirun in container" if self.ranks_inside else "mpirun"

    def cleanup(self, job: Job) -> None:
        """Remove what outlives the launcher's process group (containers, mounts)."""


# Settings that change what the workload does; passed into every runtime alike.
WORKLOAD_PREFIXES = ("OMP_", "OPENBLAS_", "MKL_", "MPICH_", "OMPI_MCA_", "GLIBC_TUNABLES")


# Ranks in separate user namespaces (one Apptainer or ch-run per rank) cannot open
# each other's /proc/PID/fd, which UCX's shared memory uses by default, nor read each
# other's memory with process_vm_readv (UCX's CMA transport for large messages aborts
# with "Operation not permitted"); named segments in the shared /dev/shm keep the
# shared-memory path, at the cost of an extra copy for large messages.
# Open MPI's shared-memory BTL (vader) uses cross-memory attach for large messages by
# default; across user namespaces that fails and the ranks spin forever. MPICH ignores it.
UCX_SHM = {
    "UCX_POSIX_USE_PROC_LINK": "n",
    "UCX_TLS": "^cma",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
}
UCX_SHM_NOTE = (
    "UCX_POSIX_USE_PROC_LINK=n UCX_TLS=^cma OMPI_MCA_btl_vader_single_copy_mechanism=none "
    "(ranks in separate user namespaces share memory through /dev/shm, not /proc/PID/fd, "
    "and cannot use cross-memory attach: UCX for MPICH and Open MPI's UCX PML, vader for "
    "Open MPI's shared-memory BTL)"
)


ARG_STRLEN = 32 * 4096  # Linux's MAX_ARG_STRLEN: the most one argument or NAME=VALUE holds
ENV_BYTES = 512 << 10  # all the variables together: a quarter of the usual 2 MiB ARG_MAX,
# the rest for the engine's and mpirun's own arguments and the variables they add


def check_env(env: dict[str, str]) -> None:
    """A KitError naming a variable the trials start with that no program could be
    started with (execve's "argument list too long": the Docker trial failed with it and
    an empty cause, after the native trial had run), found before the first trial."""
    sizes = {k: len(f"{k}={v}".encode(errors="surrogateescape")) + 1 for k, v in env.items()}
    for name, n in sizes.items():
        if n > ARG_STRLEN:
            raise KitError(
                f"the variable {schema.printable(name[:64])} holds {n} bytes, more than the "
                f"{ARG_STRLEN} one variable may hold in a program's start (Linux's "
                "MAX_ARG_STRLEN); unset or shorten it before kit run"
            )
    if (total := sum(sizes.values())) > ENV_BYTES:
        largest = sorted(sizes, key=lambda k: -sizes[k])[:3]
        raise KitError(
            f"the variables trials start with hold {total} bytes (largest: "
            f"{schema.printable(', '.join(x[:64] for x in largest))}), more than the {ENV_BYTES} "
            "kit leaves room for beside a runtime's own arguments; unset some before kit run"
        )


def user_env() -> dict[str, str]:
    """The environment trials start with, the same for every runtime: identity, locale
    and the thread/BLAS/MPI settings a user may tune, nothing else from the host."""
    keep = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "TERM")
    prefixes = (*WORKLOAD_PREFIXES, "UCX_", "KIT_", "APPTAINER", "SINGULARITY", "HYDRA_", "SLURM_")
    env = {k: v for k, v in os.environ.items() if k in keep or k.startswith(prefixes)}
    env.setdefault("USER", getpass.getuser())  # ch-run needs $USER
    return env
