"""kit's messages through logging: --quiet, --verbose and KIT_LOG_LEVEL choose how much it
says on stderr; no module of kit prints there but through it."""

import logging
import re
from pathlib import Path

import pytest

from kit import cli
from kit.core import log, proc
from kit.core.errors import KitError

RUNNER = Path(__file__).resolve().parents[3] / "runner" / "kit"
# programs of their own (python -m ...), with no kit command around them
STANDALONE = {"results/schemas.py", "launch/slurm_wait.py"}


@pytest.fixture(autouse=True)
def level_kept():
    yield
    log.set_level(log.DEFAULT)


def test_no_module_prints_to_stderr_but_through_logging():
    printing = [
        str(p.relative_to(RUNNER))
        for p in RUNNER.rglob("*.py")
        if re.search(r"file=sys\.stderr", p.read_text())
    ]
    assert sorted(printing) == sorted(STANDALONE)


@pytest.mark.parametrize(
    "quiet, verbose, env, want",
    [
        (False, False, None, logging.INFO),
        (True, False, "debug", logging.WARNING),
        (False, True, "error", logging.DEBUG),
        (False, False, "warning", logging.WARNING),
        (False, False, "ERROR", logging.ERROR),
        (False, False, "", logging.INFO),
    ],
)
def test_the_flags_then_kit_log_level_then_info(quiet, verbose, env, want, monkeypatch):
    if env is not None:
        monkeypatch.setenv("KIT_LOG_LEVEL", env)
    assert log.level(quiet, verbose) == want


def test_a_level_kit_does_not_know_is_one_line_naming_the_fix(monkeypatch, capsys):
    monkeypatch.setenv("KIT_LOG_LEVEL", "loud")
    assert cli.main(["presets"]) == 2
    assert capsys.readouterr().err == (
        "kit: error: KIT_LOG_LEVEL 'loud' must be one of debug, info, warning, error\n"
    )
    with pytest.raises(KitError, match="give one"):
        log.level(True, True)


def test_verbose_says_each_command_kit_runs_quiet_hides_progress(capsys):
    log.set_level(log.level(False, True))
    proc.capture(["true"], "true")
    assert capsys.readouterr().err == "+ true\n"
    log.set_level(log.DEFAULT)
    proc.capture(["true"], "true")
    proc.stream(["true"], "true")
    assert capsys.readouterr().err == "+ true\n"  # stream's, which shows its progress
    log.set_level(log.level(True, False))
    proc.stream(["true"], "true")
    log.logger("kit.run.campaign").warning("kit: warning: still said")
    assert capsys.readouterr().err == "kit: warning: still said\n"


def test_quiet_from_the_command_line_leaves_errors(capsys):
    assert cli.main(["--quiet", "report", "/nonexistent"]) == 2
    assert capsys.readouterr().err.startswith("kit: error: results directory")
    assert logging.getLogger("kit").level == logging.WARNING


@pytest.mark.parametrize(
    "argv, quiet, verbose",
    [
        (["-q", "presets"], True, False),
        (["presets", "--quiet"], True, False),
        (["cache", "ls", "-v"], False, True),
        (["--verbose", "cache", "ls"], False, True),
        (["cache", "ls"], False, False),
    ],
)
def test_quiet_and_verbose_go_before_the_command_or_after_it(argv, quiet, verbose):
    a = cli.parser().parse_args(argv)
    assert (a.quiet, a.verbose) == (quiet, verbose)
