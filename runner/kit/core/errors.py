"""The one exception type for user-facing failures, and kit's exit codes: one table, the
same for every command (docs/commands.md, `kit --help`)."""

EXIT_OK = 0
"""Done: what was asked ran, and found nothing beyond a bound."""
EXIT_FAILED = 1
"""What was asked ran and failed (a tool, an arm), or found a bound exceeded."""
EXIT_USAGE = 2
"""A mistake in what was asked (an option, a path, a missing tool): nothing ran."""
EXIT_UNDECIDED = 3
"""It ran and cannot tell: an interval straddles its bound; more rounds would narrow it."""
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C or SIGINT (128 + the signal's number, as a shell says it)."""

EXIT_CODES = {
    EXIT_OK: "done",
    EXIT_FAILED: "ran and failed, or found a bound exceeded",
    EXIT_USAGE: "a mistake in what was asked (nothing ran)",
    EXIT_UNDECIDED: "cannot tell (an interval straddles its bound)",
    EXIT_INTERRUPTED: "interrupted",
}
"""Each exit code with its meaning, as `kit --help` and docs/commands.md list them."""


class KitError(Exception):
    """A failure the user can fix: the CLI prints its message on one line and exits with
    `status` (EXIT_USAGE: a mistake in what was asked)."""

    status = EXIT_USAGE


class Failed(KitError):
    """What was asked ran and failed (a tool kit called exited non-zero): EXIT_FAILED, not
    the usage code, so a script can tell a broken build from a mistyped option."""

    status = EXIT_FAILED


class RunFailed(Failed):
    """A campaign ran, its records are kept, and some arm has no trial that succeeded."""
