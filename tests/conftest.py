"""Shared fixtures: a throwaway kit root with one small recipe, for tests that render."""

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

MINI = """\
name = "mini-openmpi"
version = "0.1.0"
description = "test recipe"
distro = "bookworm"
stack = "historical"
variants = ["cpu"]
benchmarks = ["torch-cnn"]

[frameworks]
torch = "1.13.1"

[mpi]
flavour = "openmpi"
version = "4.1.4-3+b1"

[apt]
packages = ["python3=3.11.2-1+b1"]

[pip]
build = ["setuptools==70.3.0"]
packages = ["mpi4py==3.1.4"]
from_source = ["mpi4py"]
"""


@pytest.fixture
def mini() -> str:
    """The mini recipe's text, for tests that write variations of it."""
    return MINI


@pytest.fixture
def kit_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the repository layout holding only the mini recipe."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "mini-openmpi.toml").write_text(MINI)
    shutil.copytree(REPO / "benchmarks", tmp_path / "benchmarks")
    monkeypatch.setenv("KIT_ROOT", str(tmp_path))
    return tmp_path
