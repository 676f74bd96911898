"""The one exception type for user-facing failures."""


class KitError(Exception):
    """A failure the user can fix: the CLI prints its message on one line and exits with
    `status` (2: a mistake in what was asked; 1: what was asked ran and failed)."""

    status = 2


class RunFailed(KitError):
    """A campaign ran, its records are kept, and some arm has no trial that succeeded."""

    status = 1
