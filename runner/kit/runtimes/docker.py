"""Docker: one container per trial; with several ranks, mpirun runs inside it.

Docker's client does not pass the host launcher's PMI connection into the
container, so the host mpirun cannot wire up ranks here (unlike Apptainer or
Charliecloud); ranks share one container, launched by the image's own mpirun.
Under --hosts, where each host runs an engine of its own, the host launcher starts a
container per rank, which reaches MPICH's launcher over a TCP port instead.
"""

import dataclasses
import os
import subprocess
from typing import TYPE_CHECKING

from kit.core import schema
from kit.core.errors import KitError
from kit.image import engine
from kit.image.recipes import Recipe
from kit.runtimes import base
from kit.runtimes.base import Job, Prepared, Runtime, SiteOption
from kit.runtimes.gpu import Access

if TYPE_CHECKING:
    from kit.image.foreign import Foreign

ENTRY = ("--entrypoint=",)  # a foreign image's command runs as given


class Docker(Runtime):
    name = "docker"
    product = "Docker"
    summary = "the built image in the local Docker engine"
    runs = "engine"
    needs = ("engine", "base")
    tool = "docker"
    fix = "install docker.io and start dockerd (as root: ci/provision)"
    ranks_inside = True
    host_list = True  # where each host runs its own engine: one container per rank there
    pmi_port = True
    engine_id = ("docker", "info", "--format", "{{.ID}}")
    client_env = ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_TLS_VERIFY")
    client_env += ("DOCKER_CERT_PATH",)
    service = "the Docker engine"
    service_lost = ("Cannot connect to the Docker daemon", "error during connect")
    # the engine, its container daemon and the container's shim (containerd-shim-runc-v2,
    # which also waits for runc), its port proxy
    helpers = ("dockerd", "containerd", "containerd-shim", "docker-proxy")
    site_options = {  # noqa: RUF012
        "allow_docker": SiteOption(
            schema.Field(bool), False, "only sites whose compute nodes run a Docker engine"
        )
    }
    gpu = Access(
        ("--gpus=all",),
        "the NVIDIA Container Toolkit, whose hook dockerd runs for --gpus",
        tools=("nvidia-container-runtime-hook",),
    )
    settings = (
        "--network=host (MPI and Gloo use the host's interfaces, as natively)",
        "--ipc=host (no 64 MB /dev/shm limit on MPI shared memory)",
        "--user UID:GID of the caller (no root inside)",
        "--init (signals reach the benchmark; no zombie ranks)",
        "under --hosts, each host's own engine, one container per rank: --pid=host (its "
        "ranks on one host share memory as native ones do) and " + base.UCX_SHM_NOTE,
    )

    @classmethod
    def client(cls) -> str:
        """The client the engine check, conversions and trials all use (engine.docker:
        KIT_DOCKER, else the first on PATH that builds with BuildKit), not PATH's first."""
        return engine.docker()

    def check(self) -> None:
        engine.server_version()

    def version(self) -> str:
        return "docker " + engine.server_version()

    def prepare(self, recipe: Recipe, variant: str) -> Prepared:
        tag = recipe.tag(variant)
        return base.in_image(tag, engine.image_id(tag))

    def prepare_foreign(self, image: "Foreign") -> Prepared:
        if image.kind != "engine":
            raise KitError(
                f"runtime 'docker' runs images in the engine, not '{image.source}'; give "
                "--image docker:NAME:TAG, or run the SIF under singularity and charliecloud"
            )
        # the user's command runs as given, whatever entrypoint the image declares
        return dataclasses.replace(base.in_image(image.ref, image.digest), options=ENTRY)

    def command(self, prep: Prepared, job: Job) -> list[str]:
        head = [engine.docker(), "run", "--rm", "--init", "--name", job.name]
        head += ["--user", f"{os.getuid()}:{os.getgid()}", "--network=host", "--ipc=host"]
        return base.one_container(head, prep, job)

    def exec_argv(self, prep: Prepared, job: Job) -> list[str]:
        """One rank in a container of its own (under --hosts, started on each host by its
        engine, whose client there is `docker` on PATH)."""
        head = [self.tool, "run", "--user", f"{os.getuid()}:{os.getgid()}"]
        return base.rank_container(head, prep, job)

    def identity(self, prep: Prepared) -> list[str]:
        """The image id the host's engine holds under the tag."""
        return [self.tool, "image", "inspect", "--format", "{{.Id}}", prep.ref]

    def leftovers(self, job: Job) -> base.Leftovers:
        return base.rank_containers(self.tool, job)

    def slurm_step(self, prep: Prepared, job: Job, site, launcher: list[str]) -> list[str]:
        """One task that runs the container, whose own mpirun starts the ranks inside."""
        if not site.option("allow_docker"):
            raise KitError(
                "runtime 'docker' under Slurm needs a Docker engine on the compute nodes, "
                "which most sites do not allow; use singularity or charliecloud, or set "
                "allow_docker = true in --slurm-config"
            )
        return ["srun", "--ntasks=1", *self.command(prep, job)]

    def cleanup(self, job: Job) -> None:
        subprocess.run([engine.docker(), "rm", "-f", job.name], capture_output=True)
