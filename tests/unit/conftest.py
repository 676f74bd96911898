"""Facts about a host, injected: unit tests need nothing but Python."""

import os
import shutil
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from kit.image import engine, recipes
from kit.runtimes import RUNTIMES

# Hypothesis keeps nothing in the checkout: CI's job user cannot write into the root-owned
# clone (a failing example is printed with its seed anyway). Without its cache, the first
# text drawn in a run builds Hypothesis' Unicode tables (about 1 s), which its too_slow
# health check took for a slow strategy when that test ran first. No deadline: on a loaded
# host one example past the default 200 ms, fast when Hypothesis runs it again, failed its
# test as FlakyFailure (unreliable timings) with no fault in the code. Derandomized: the
# same examples every run (drawn from each test's own seed), so a rare input cannot fail
# one run and pass the next (a wider search: this profile without derandomize).
settings.register_profile(
    "kit",
    database=None,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("kit")


@pytest.fixture(autouse=True)
def signal_handlers_kept() -> Iterator[None]:
    """kit run's start turns SIGTERM into Ctrl-C for its campaign; a test that runs it in
    this process must not leave that for the tests after it (nor for pytest's own end)."""
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


@pytest.fixture
def host_tools(tmp_path, monkeypatch) -> Iterator[Path]:
    """A PATH on which every runtime's command and each MPI flavour's mpirun is found (a
    stub that fails if run, for each the host lacks), and a docker client whose engine
    answers: a dry run checks the host as the run does, and these tests must plan
    without one."""
    stubs = tmp_path / "host-tools"
    stubs.mkdir()
    names = {cls.tool for cls in RUNTIMES.values()} | {"mpirun", "sbatch", "scontrol"}
    names |= {r.mpi.spec.mpirun for r in recipes.load_all().values()}
    for name in sorted(n for n in names if n and shutil.which(n) is None):
        tool = stubs / name
        tool.write_text("#!/bin/sh\nexit 99\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{stubs}{os.pathsep}{os.environ.get('PATH', '')}")
    client = stubs / "docker-answering"
    client.write_text('#!/bin/sh\ncase "$1" in version) echo 99.0 ;; *) exit 99 ;; esac\n')
    client.chmod(0o755)
    monkeypatch.setenv("KIT_DOCKER", str(client))
    engine.docker.cache_clear()  # the client is chosen once per process
    yield stubs
    engine.docker.cache_clear()


@pytest.fixture(autouse=True)
def _in_a_folder_of_its_own(tmp_path, monkeypatch) -> None:
    """Every unit test runs in its own temporary folder: a dry run checks that its default
    --out (results/... under the working folder) can be made, and CI's job user cannot
    write into the root-owned checkout; nor should a test leave files in it."""
    monkeypatch.chdir(tmp_path)


REPO = Path(__file__).resolve().parents[2]
# What a Python subprocess of a test imports: this checkout's kit and kitbench, not the kit
# the venv's editable install names (the checkout provisioned last, maybe another test
# run's on this machine), nor nothing (a relative PYTHONPATH, once a test is in tmp_path).
THIS_CHECKOUT = os.pathsep.join(str(REPO / d) for d in ("runner", "benchmarks"))


@pytest.fixture(autouse=True)
def _subprocesses_import_this_checkout(monkeypatch) -> None:
    """A test's `python -m kit.cli` or `-c "from kit ..."` runs the code under test."""
    monkeypatch.setenv("PYTHONPATH", THIS_CHECKOUT)


@pytest.fixture(autouse=True)
def _no_catalogue(monkeypatch) -> None:
    """Campaigns run by unit tests register in no results catalogue: not in the user's
    cache, and not at a cost to the simulations' thousands of campaigns (the tests of
    the catalogue name their own file)."""
    monkeypatch.setenv("KIT_CATALOGUE", "off")
