"""The one exception type for user-facing failures, and the exit codes kit's commands
share (docs/results.md names what each command's mean)."""

EXIT_OK = 0  # what was asked was done (kit check: every bound held)
EXIT_FAILED = 1  # what was asked ran and failed (kit check: an interval wholly beyond its bound)
EXIT_USAGE = 2  # a mistake in what was asked: nothing was done
EXIT_UNDECIDED = 3  # kit check: some interval cannot settle its bound (too few rounds, or wide)
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C (128 + SIGINT, as a shell says)


class KitError(Exception):
    """A failure the user can fix: the CLI prints its message on one line and exits with
    `status` (EXIT_USAGE: a mistake in what was asked; EXIT_FAILED: what was asked ran
    and failed)."""

    status = EXIT_USAGE


class RunFailed(KitError):
    """A campaign ran, its records are kept, and some arm has no trial that succeeded."""

    status = EXIT_FAILED
