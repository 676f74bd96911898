"""Integration fixtures: one real build and conversion of pytorch-mpich per session.

These need the Docker engine, the base image, Apptainer, Charliecloud and MPICH
(ci/test provisions them) and must run as an ordinary user. They fail, with
`kit doctor`'s table as the reason, when something is missing.
"""

import os
import subprocess
import time
from pathlib import Path

import pytest

IMAGE = "pytorch-mpich"
RUNTIMES = "native,docker,singularity,charliecloud"


def kit(
    *args: str, check: bool = True, timeout: float = 1800, env: dict | None = None
) -> subprocess.CompletedProcess:
    p = subprocess.run(["kit", *args], capture_output=True, text=True, timeout=timeout, env=env)
    if check and p.returncode != 0:
        pytest.fail(f"kit {' '.join(args)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p


@pytest.fixture(scope="session")
def ready() -> None:
    if os.geteuid() == 0:
        pytest.fail("integration tests must run as an ordinary user: use ci/test")
    doctor = kit("doctor", "--runtime", RUNTIMES, check=False)
    if doctor.returncode != 0:
        pytest.fail("this host lacks what the tests need (run ci/provision):\n" + doctor.stdout)


@pytest.fixture(scope="session")
def built(ready) -> dict:
    """Build and convert once; later conversions of the same digest must be free."""
    t0 = time.monotonic()
    kit("build", IMAGE)
    t1 = time.monotonic()
    conv = kit("convert", IMAGE, "--to", "singularity,shifter")
    t2 = time.monotonic()
    return {
        "dir": Path(conv.stdout.strip().splitlines()[-1]),
        "build_s": t1 - t0,
        "convert_s": t2 - t1,
    }
