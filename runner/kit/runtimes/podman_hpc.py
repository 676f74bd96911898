"""podman-hpc (NERSC's wrapper of rootless Podman): the image migrated into its squashed,
read-only store, started either one container per rank or one container per node whose
ranks are exec'd in (`shared-run`), with site modules binding the host's MPI in.

kit writes the site configuration (SITE: the graph and squash stores in the job user's
cache, host networking, the modules that apply on a CPU machine) and points every
podman-hpc call at it through the environment; nothing under /etc is read. The migration
reuses kit's own squashfs of the image (the flattened root Shifter's gateway makes, filed
by digest like every product): it is linked into the squash store where `podman-hpc
migrate` looks for the file it would otherwise make with a static mksquashfs run inside
the image, which Debian does not ship; migrate then files the image's records.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.paths import cache_dir, link_or_copy, write_atomically
from kit.core.proc import capture
from kit.image import convert
from kit.image.recipes import FLAVOURS, Recipe
from kit.runtimes import apptainer, base
from kit.runtimes.base import Job, Prepared, Runtime
from kit.runtimes.gpu import Access

log = logger(__name__)

VERSION = "1.2.2"  # the pinned release ci/provision installs
# what each launcher gives a rank: its place on the node and the node's rank count, which
# shared-run reads to let the node's first rank start the container and the last stop it
LOCAL_RANK = {
    "mpich": ("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    "openmpi": ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    "srun": ("SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE"),
}
# what a rank gets of its launcher's environment (an exec'd one: the container's own is
# the node's first rank's): PMI, Hydra's local ranks, Open MPI's and PMIx's (the server's
# address and the rank's place), Slurm's, kit's
EXEC_ENV = ("PMI_*", "MPI_LOCAL*", "OMPI_*", "PMIX_*", "SLURM_*", "KIT_TRIAL")
# Open MPI's ranks as root inside reach mpirun's PMIx server over loopback TCP (PMIx 4
# needs no socket file), but its native security check refuses them: mpirun registered
# each rank with the caller's uid, and root in the container is another. Client and server
# (mpirun, in the trial's environment) take the check that accepts any local peer, for the
# job's own server and its lifetime, and the hash datastore instead of the session
# folder's shared memory files, which are the host's /tmp.
OPENMPI_PMIX = (("PMIX_MCA_psec", "none"), ("PMIX_MCA_gds", "hash"))
MPI_MODULE = "mpi"  # the site module's flag (NERSC's name): the host's MPICH-ABI library
GPU_MODULE = "gpu"  # NERSC's: the driver's libraries and devices (a cuda variant's trials)


def site_dir() -> Path:
    return cache_dir() / "podman-hpc"


def site_files(root: Path, mpich: str | None) -> dict[str, str]:
    """The site configuration kit writes (path under root -> text): podman-hpc's own file,
    Podman's containers.conf (host networking: slirp4netns cannot open /dev/net/tun
    unprivileged, and migrate's helper container would need it) and the site modules. The
    MPI module binds mpich (the host's staged MPICH-ABI library) where the image's
    LD_LIBRARY_PATH finds it first; without one there is no such module."""
    site = {
        "podman_bin": shutil.which("podman") or "/usr/bin/podman",  # it execs it: a path
        "modules_dir": str(root / "modules.d"),
        "graph_root": str(root / "graph"),
        "run_root": str(root / "run"),
        "config_home": str(root / "config"),
        "mksquashfs_bin": "/usr/bin/mksquashfs",  # unused: kit places the squash file
        "shared_run_exec_args": [x for k in EXEC_ENV for x in ("-e", k)],
    }
    files = {
        "podman_hpc.yaml": json.dumps(site, indent=2) + "\n",  # JSON is YAML
        "containers.conf": '[containers]\nnetns = "host"\n',
    }
    gpu = {
        "name": "gpu",
        "cli_arg": GPU_MODULE,
        "help": "the host's NVIDIA GPUs (CDI) and driver",
        "env": "ENABLE_GPU",
        "additional_args": ["--device=nvidia.com/gpu=all", "-e", "NVIDIA_VISIBLE_DEVICES"],
    }
    files["modules.d/gpu.yaml"] = json.dumps(gpu, indent=2) + "\n"
    if mpich:
        soname = FLAVOURS["mpich"].library
        mpi = {
            "name": "mpich",
            "cli_arg": MPI_MODULE,
            "help": "the host's MPICH-ABI library in place of the image's",
            "env": "ENABLE_MPICH",
            "additional_args": [
                f"--volume={mpich}:{apptainer.HOST_MPI}/{soname}:ro",
                f"--env=LD_LIBRARY_PATH={apptainer.HOST_MPI}",
            ],
        }
        files["modules.d/mpich.yaml"] = json.dumps(mpi, indent=2) + "\n"
    return {f"{root}/{name}": text for name, text in files.items()}


def site_env(root: Path) -> tuple[tuple[str, str], ...]:
    """What points podman-hpc (and the Podman it calls) at kit's site configuration."""
    return (
        ("PODMANHPC_CONFIG_FILE", str(root / "podman_hpc.yaml")),
        ("SQUASH_DIR", str(root / "squash")),
        ("CONTAINERS_CONF", str(root / "containers.conf")),
    )


def write_site(mpich: str | None) -> tuple[tuple[str, str], ...]:
    """Write the site configuration where it differs; its environment."""
    root = site_dir()
    for path, text in site_files(root, mpich).items():
        target = Path(path)
        if not target.is_file() or target.read_text() != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(target, text)
    return site_env(root)


def _store(folder: Path) -> list[dict]:
    """The image records of a Podman overlay store (its images.json); [] when none."""
    try:
        data = json.loads((folder / "overlay-images" / "images.json").read_text())
    except (OSError, ValueError):
        return []
    return [i for i in data if isinstance(i, dict)] if isinstance(data, list) else []


def migrated(squash: Path, ref: str) -> str:
    """The id of the image the squash store holds under ref ("" when none)."""
    return next((i["id"] for i in _store(squash) if ref in i.get("names", [])), "")


def top_layer(store: Path, image_id: str) -> str:
    """The top layer of an image in a store ("" when it holds no such image)."""
    return next((str(i.get("layer", "")) for i in _store(store) if i.get("id") == image_id), "")


class PodmanHpc(Runtime):
    name = "podman-hpc"
    product = "Podman-HPC"  # as it names itself (infohpc)
    summary = "podman-hpc on the image migrated to its squashed store, one container per rank"
    runs = "squashfs"  # and the docker-save archive it loads before migrating
    host_list = True
    needs = ("engine", "squashfs", "fuse")
    tool = "podman-hpc"
    fix = (
        f"as root: ci/provision (podman-hpc {VERSION} from the package index in its own "
        "venv, with fuse-overlayfs and squashfuse)"
    )
    client_env = ("XDG_RUNTIME_DIR",)
    # Podman's own, the squashed store's FUSE mount under the overlay, and the wrapper's
    # watch (inotifywait) that ends a shared-run container with its last rank
    helpers = ("conmon", "fuse-overlayfs", "squashfuse_ll", "squashfuse", "inotifywait")
    gpu = Access(
        (f"--{GPU_MODULE}",),
        "a CDI spec of the GPUs (as root: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml)",
        cdi=True,
    )
    env = base.UCX_SHM
    settings = (
        "the image migrated to podman-hpc's squashed read-only store (kit's squashfs, "
        "squashfuse under fuse-overlayfs)",
        "site configuration written by kit: graph and squash store in the job user's cache, "
        "host network (containers.conf)",
        "--network=host --ipc=host --pid=host (as Podman's rank containers); root inside, the "
        "caller outside (podman-hpc's way: --userns=keep-id needs a writable copy of the image, "
        "which the squashed store cannot give)",
        base.UCX_SHM_NOTE,
        "one container per rank: the host's mpirun starts one podman-hpc run per rank",
    )

    # its own version, without the side effect of its first call: a squash store made at
    # $SCRATCH/storage (or /tmp/storage) when the one it is given does not exist
    version_argv = ("--squash-dir", "/dev/null", "infohpc")

    def version(self) -> str:
        """podman-hpc's own version and the Podman it drives."""
        return f"{super().version()} ({base.tool_version(['podman', '--version'])})"

    def prepare(self, recipe: Recipe, variant: str) -> Prepared:
        """Migrate the image unless the squash store holds this very one; the site's MPI
        module binds the host's MPICH-ABI library when the host has one."""
        if recipe.mpi.flavour not in LOCAL_RANK:
            raise KitError(
                f"runtime 'podman-hpc' runs MPICH and Open MPI images, not {recipe.name} "
                f"({recipe.mpi.flavour}); run it under singularity or charliecloud"
            )
        try:
            mpich = apptainer.staged(apptainer.host_library(FLAVOURS["mpich"].library))
        except KitError:
            mpich = None
        env = write_site(mpich)
        art = convert.convert(recipe, variant, [self.runs, "docker-archive"])
        ref = migrate(f"localhost/{recipe.tag(variant)}", art, dict(env))
        locals_ = LOCAL_RANK[recipe.mpi.flavour]
        env += (("PODMANHPC_LOCALID_VAR", locals_[0]), ("PODMANHPC_TASKS_PER_NODE_VAR", locals_[1]))
        said: tuple[str, ...] = ()
        if recipe.mpi.flavour == "openmpi":
            env += OPENMPI_PMIX
            said = (
                "Open MPI: PMIX_MCA_psec=none PMIX_MCA_gds=hash for mpirun and its ranks "
                "(root inside is not the uid mpirun registered each rank with)",
            )
        return dataclasses.replace(
            base.in_image(ref, art.digest), env=env, files=(mpich,) if mpich else (), settings=said
        )

    def client_argv(self) -> list[str]:
        """podman-hpc with the site's environment on its command line: what a host asked
        over ssh (or a clean-up, outside a trial's environment) runs."""
        return ["env", *(f"{k}={v}" for k, v in site_env(site_dir())), self.tool]

    def identity(self, prep: Prepared) -> list[str]:
        """The image id the squash store holds under the tag."""
        query = ["images", "--no-trunc", "--format", "{{.Id}}", "--filter", f"reference={prep.ref}"]
        return [*self.client_argv(), *query]

    def head(self) -> list[str]:
        return [self.tool, "run"]

    def exec_argv(self, prep: Prepared, job: Job) -> list[str]:
        """One rank: its own container (base.rank_container), given the rank's PMI socket
        from MPICH's Hydra or srun (podman-hpc passes it in as fd 3), or Open MPI's and
        PMIx's variables (the server's address, the rank's place, OPENMPI_PMIX)."""
        argv = base.rank_container(self.head(), prep, job)
        at = argv.index("KIT_TRIAL") + 1
        passed = ("PMI_FD", "PMI_RANK", "OMPI_*", "PMIX_*")
        return [*argv[:at], *(x for k in passed for x in ("-e", k)), *argv[at:]]

    def leftovers(self, job: Job) -> base.Leftovers:
        """A trial's containers (a rank's, or a node's shared one: both carry its label)."""
        label = f"label={base.TRIAL_LABEL}={job.name}"
        client = self.client_argv()
        return base.Leftovers(
            [*client, "ps", "--all", "--quiet", "--filter", label], [*client, "rm", "--force"]
        )

    def cleanup(self, job: Job) -> None:
        """What the trial's ranks left here (a killed client's container)."""
        left = self.leftovers(job)
        ids = subprocess.run(left.find, capture_output=True, text=True).stdout.split()
        if ids:
            subprocess.run([*left.remove, *ids], capture_output=True)


class PodmanHpcShared(PodmanHpc):
    """The shared-run model NERSC recommends under a parallel launcher: on each node the
    first rank starts one container (sleep infinity) and every rank is exec'd into it."""

    name = "podman-hpc-shared"
    summary = "podman-hpc shared-run: one container per node, its ranks exec'd in"
    settings = (
        *PodmanHpc.settings[:4],
        "one container per node (podman-hpc shared-run): the host's mpirun starts one "
        "podman-hpc per rank, the node's first starts the container, each is exec'd in",
    )

    def head(self) -> list[str]:
        return [self.tool, "shared-run"]

    def slurm_step(self, prep: Prepared, job: Job, site, launcher: list[str]) -> list[str]:
        """Under srun, shared-run reads Slurm's local rank (its default); under mpirun in
        the allocation, the flavour's (the Prepared's environment)."""
        argv = super().slurm_step(prep, job, site, launcher)
        if launcher[:1] != ["srun"]:
            return argv
        local, count = LOCAL_RANK["srun"]
        pin = ["env", f"PODMANHPC_LOCALID_VAR={local}", f"PODMANHPC_TASKS_PER_NODE_VAR={count}"]
        return [*launcher, *pin, *argv[len(launcher) :]]


def migrate(ref: str, art: convert.Artifacts, env: dict[str, str]) -> str:
    """The image in podman-hpc's squash store under ref: loaded into the graph store,
    kit's squashfs linked where migrate looks for the squash file of its top layer, then
    `podman-hpc migrate`, the graph's copy removed; the earlier image ref named (a changed
    image) removed from the squash store. Nothing is done when the store holds it."""
    squash, graph = Path(env["SQUASH_DIR"]), site_dir() / "graph"
    image_id = art.digest.split(":")[-1]
    held = migrated(squash, ref)
    if held == image_id:
        log.info(f"podman-hpc: {ref} migrated (cached for {art.digest[:19]})")
        return ref
    run_env = {**os.environ, **env}
    t0 = time.monotonic()
    tool = PodmanHpc.tool
    capture([tool, "load", "--quiet", "--input", str(art.tar)], "podman-hpc load", env=run_env)
    top = top_layer(graph, image_id)
    link = (graph / "overlay" / top / "link").read_text().strip() if top else ""
    if not link:
        raise KitError(
            f"podman-hpc load of {art.tar} left no image {image_id[:12]} in {graph}; "
            f"remove {site_dir()} and run again"
        )
    target = squash / "overlay" / "l" / f"{link}.squash"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        link_or_copy(art.squashfs, target)  # the cache's own file
    out = subprocess.run([tool, "migrate", ref], capture_output=True, text=True, env=run_env)
    if migrated(squash, ref) != image_id:  # migrate exits 0 whatever happened
        raise KitError(
            f"podman-hpc migrate {ref} failed: {(out.stderr or out.stdout).strip()[-300:]}"
        )
    subprocess.run([tool, "rmi", ref], capture_output=True, env=run_env)  # the graph's copy
    if held and top_layer(squash, held) != top:  # same layers (a changed config): one squash
        subprocess.run([tool, "rmsqi", held], capture_output=True, env=run_env)
    log.info(f"podman-hpc: {ref} migrated in {time.monotonic() - t0:.1f} s")
    return ref
