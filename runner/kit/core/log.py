"""kit's messages (progress, warnings, errors) on stderr, through `logging`, so a script
or a cron job can have fewer (--quiet, KIT_LOG_LEVEL=warning) or more (--verbose: every
command kit runs) while stdout holds only a command's result.

Each module takes its logger from `logger(__name__)`; every one is a child of `kit`,
whose one handler writes the message alone, as kit has always printed it, to the
sys.stderr of the moment (a redirect, a test's capture)."""

import logging
import sys
from typing import TextIO

from kit.core import settings
from kit.core.errors import KitError

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
DEFAULT = logging.INFO


class _Stderr(logging.StreamHandler):
    """A handler on whatever sys.stderr is when a message is written."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


ROOT = logging.getLogger("kit")
ROOT.addHandler(_Stderr())
ROOT.setLevel(DEFAULT)
ROOT.propagate = False  # the application's handler only, not a root one set up elsewhere


def logger(name: str) -> logging.Logger:
    """A module's logger, under kit's (name: the module's __name__)."""
    return logging.getLogger(name)


def level(quiet: bool, verbose: bool) -> int:
    """The level asked for: --quiet (warnings and errors), --verbose (also every command
    kit runs), else KIT_LOG_LEVEL, else info; a KitError for a level it does not know."""
    if quiet and verbose:
        raise KitError("--quiet and --verbose ask for opposite things; give one")
    if quiet or verbose:
        return logging.WARNING if quiet else logging.DEBUG
    said = settings.value("KIT_LOG_LEVEL")
    if said is None:
        return DEFAULT
    if said.lower() not in LEVELS:
        raise KitError(f"KIT_LOG_LEVEL '{said}' must be one of {', '.join(LEVELS)}")
    return LEVELS[said.lower()]


def set_level(value: int) -> None:
    ROOT.setLevel(value)
