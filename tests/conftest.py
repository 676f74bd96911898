"""Shared fixtures: a throwaway kit root with one small recipe, for tests that render."""

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

MINI = """\
name = "mini-openmpi"
version = "0.1.0"
source_date_epoch = 1795824000
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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all-images",
        action="store_true",
        help="also the tests of every other recipe's image (builds them all: ci/test --all-images)",
    )
    parser.addoption(
        "--only-image",
        action="append",
        default=[],
        metavar="IMAGE",
        help="only the integration tests that need this image (repeatable; a CI matrix's cell)",
    )


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """Time per tier (set-up, call and tear-down of its tests), for ci/test's closing
    summary; the builds' spans are the integration conftest's line."""
    spent: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for r in reports:
            if isinstance(r, pytest.TestReport):
                tier = "integration" if "integration/" in r.nodeid else "unit"
                spent[tier] = spent.get(tier, 0.0) + r.duration
    if spent:
        spans = ", ".join(f"{tier} {s:.0f} s" for tier, s in sorted(spent.items()))
        terminalreporter.write_line(f"time per tier: {spans}")
