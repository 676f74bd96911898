"""Native: the host's own python and MPI, with the image's pins (see kit.runtimes.native_env)."""

from pathlib import Path
from typing import TYPE_CHECKING

from kit.core.paths import repo_root
from kit.image.recipes import Recipe
from kit.runtimes import native_env
from kit.runtimes.base import Job, Prepared, Runtime
from kit.runtimes.gpu import Access

if TYPE_CHECKING:
    from kit.image.foreign import Foreign


class Native(Runtime):
    name = "native"
    summary = "the host's python and MPI, with the image's pinned packages in a venv"
    runs = "host"
    host_list = True
    needs = ("mpich",)
    tool = "python3"
    fix = "install python3"
    gpu = Access(needs="the NVIDIA driver's libcuda.so.1 (CUDA's libraries are pinned wheels)")

    def version(self) -> str:
        return "host"

    def prepare(self, recipe: Recipe, variant: str) -> Prepared:
        python, identity = native_env.ensure(recipe, variant)
        # the image's own environment (e.g. TORCH_USE_RTLD_GLOBAL for Horovod's torch
        # extension) applies natively too: same software, same settings
        return Prepared(
            str(python),
            identity,
            str(python),
            str(repo_root() / "benchmarks"),
            env=tuple(recipe.env),
            settings=tuple(f"{k}={v} (the image's environment)" for k, v in recipe.env),
        )

    def prepare_foreign(self, image: "Foreign") -> Prepared:
        """The host runs the user's own --native-command (their modules or venv): what
        software that is, only they can say; the record says it was the host's."""
        return Prepared("host", "native:host", "", "", settings=("--native-command on the host",))

    def identity(self, prep: Prepared) -> list[str] | None:
        """The venv's stamp: its pins and where its compiled packages came from."""
        stamp = Path(prep.python).parent.parent / native_env.STAMP
        return ["cat", str(stamp)] if stamp.is_file() else None

    def exec_argv(self, prep: Prepared, job: Job) -> list[str]:
        return job.program
