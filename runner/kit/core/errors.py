"""The one exception type for user-facing failures."""


class KitError(Exception):
    """A failure the user can fix: the CLI prints its message on one line and exits 2."""
