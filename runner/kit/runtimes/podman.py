"""Podman, rootless: the image's `docker save` archive loaded into the caller's store.

Settings match Docker's (host network and IPC, the caller's uid inside, an init
process), so Docker and Podman differ only in the engine: a daemon-less runtime
whose containers are started by conmon in a user namespace. As with Docker, the
ranks share one container and the image's own mpirun starts them. Under --hosts, where
each host runs its own Podman, the host launcher starts one container per rank instead
(the hybrid model), which reaches MPICH's launcher over a TCP port.
"""

import dataclasses
import subprocess
import time
from typing import TYPE_CHECKING

from kit.core.errors import Failed, KitError
from kit.core.log import logger
from kit.core.proc import capture
from kit.image import convert, engine
from kit.image.recipes import Recipe
from kit.runtimes import base, docker
from kit.runtimes.base import Job, Prepared, Runtime
from kit.runtimes.gpu import Access

if TYPE_CHECKING:
    from kit.image.foreign import Foreign

log = logger(__name__)


class Podman(Runtime):
    name = "podman"
    product = "Podman"
    summary = "rootless Podman on the image's docker-save archive (podman load)"
    runs = "docker-archive"
    needs = ("engine",)
    tool = "podman"
    fix = "apt-get install podman catatonit uidmap (as root: ci/provision)"
    ranks_inside = True
    host_list = True  # daemon-less: every host runs its own; one container per rank there
    pmi_port = True
    client_env = ("CONTAINER_HOST", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF")
    client_env += ("XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME")  # rootless store
    # the container's monitor (which waits for crun or runc), the rootless overlay mount and
    # user-mode networking with its port forwarder
    helpers = ("conmon", "fuse-overlayfs", "slirp4netns", "pasta", "pasta.avx2", "rootlessport")
    gpu = Access(
        ("--device=nvidia.com/gpu=all",),
        "a CDI spec of the GPUs (as root: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml)",
        cdi=True,
    )
    settings = (
        "--network=host (MPI and Gloo use the host's interfaces, as natively)",
        "--ipc=host (no 64 MB /dev/shm limit on MPI shared memory)",
        "--userns=keep-id (the caller's uid and gid inside, rootless)",
        "--init (signals reach the benchmark; no zombie ranks)",
        "under --hosts, one container per rank: --pid=host (its ranks on one host share "
        "memory as native ones do) and " + base.UCX_SHM_NOTE,
    )

    def prepare(self, recipe: Recipe, variant: str) -> Prepared:
        """Load the archive unless the store already holds this very image (same id)."""
        art = convert.artifacts(recipe, variant)  # its digest: the archive is streamed
        ref = f"localhost/{recipe.tag(variant)}"
        return base.in_image(self._load(ref, art, recipe.tag(variant)), art.digest)

    def prepare_foreign(self, image: "Foreign") -> Prepared:
        if image.kind != "engine":
            raise KitError(
                f"runtime 'podman' runs a docker save archive of an engine image, not "
                f"'{image.source}'; give --image docker:NAME:TAG or PATH.tar"
            )
        art = convert.convert(image, image.variant, [self.runs])
        # by id: however podman names what it loaded, the id is the engine's
        prep = base.in_image(self._load(art.digest.split(":")[-1], art), art.digest)
        return dataclasses.replace(prep, options=docker.ENTRY)

    def _load(self, ref: str, art: convert.Artifacts, source: str = "") -> str:
        """Load the archive unless `ref` already names this image: the cached one, else
        `docker save` of the engine's `source` streamed into `podman load`, so no second
        copy of every image stays in the cache beside Podman's own (20 GB for the suite's
        images). The image `ref` named before (an earlier build of the tag) is removed once
        nothing else uses it: each rebuild would otherwise leave gigabytes behind in the
        caller's store."""
        held = subprocess.run(
            [self.tool, "image", "inspect", "--format", "{{.Id}}", ref],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if held != art.digest.split(":")[-1]:
            t0 = time.monotonic()
            if art.tar.is_file() or not source:
                capture([self.tool, "load", "--quiet", "--input", str(art.tar)], "podman load")
            else:
                save = subprocess.Popen([engine.docker(), "save", source], stdout=subprocess.PIPE)
                try:
                    capture([self.tool, "load", "--quiet"], "podman load", stdin=save.stdout)
                finally:
                    assert save.stdout is not None
                    save.stdout.close()
                    if save.wait() != 0:
                        raise Failed(f"docker save {source} for podman load failed")
            log.info(f"podman: {ref} loaded in {time.monotonic() - t0:.1f} s")
            # without --force: an image still tagged otherwise, or in use, stays
            if (
                held
                and subprocess.run([self.tool, "rmi", held], capture_output=True).returncode == 0
            ):
                log.info(f"podman: removed the earlier {ref} ({held[:12]})")
        return ref

    def command(self, prep: Prepared, job: Job) -> list[str]:
        head = [self.tool, "run", "--rm", "--init", "--name", job.name]
        head += ["--userns=keep-id", "--network=host", "--ipc=host"]
        return base.one_container(head, prep, job)

    def exec_argv(self, prep: Prepared, job: Job) -> list[str]:
        """One rank in a container of its own (under --hosts, started on each host)."""
        return base.rank_container([self.tool, "run", "--userns=keep-id"], prep, job)

    def slurm_step(self, prep: Prepared, job: Job, site, launcher: list[str]) -> list[str]:
        """One task that runs the container, whose own mpirun starts the ranks inside, as
        locally: Slurm's PMI reaches a rank through a socket it inherits, which a rank
        started by Podman's conmon does not."""
        return ["srun", "--ntasks=1", *self.command(prep, job)]

    def identity(self, prep: Prepared) -> list[str]:
        """The image id the host's own store holds under the tag."""
        return [self.tool, "image", "inspect", "--format", "{{.Id}}", prep.ref]

    def leftovers(self, job: Job) -> base.Leftovers:
        return base.rank_containers(self.tool, job)

    def cleanup(self, job: Job) -> None:
        subprocess.run([self.tool, "rm", "--force", "--ignore", job.name], capture_output=True)
