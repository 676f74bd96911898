"""The environment variables kit, its scripts and its workflows read: one table, so that
each has one meaning and one place that reads it. docs/settings.md's table is `table()`
(a unit test holds the two equal, and finds any read that passes by `value`).

The variables kit sets for a benchmark (KIT_TRIAL, KIT_BENCH, …) and an image's labels
are outputs, not settings: they are not here.
"""

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    """One environment variable a user or a site may set."""

    names: tuple[str, ...]  # more than one: read together, documented on one line
    meaning: str
    read_by: str = "kit"  # kit itself, or the script or workflow that reads it


SETTINGS = (
    Setting(("KIT_DOCKER",), "the docker client to use"),
    Setting(
        ("KIT_LOG_LEVEL",),
        "how much kit says on stderr: `debug` (also every command it runs), `info` "
        "(default), `warning`, `error`; `--quiet` and `--verbose` take precedence",
    ),
    Setting(
        ("KIT_CACHE",),
        "where conversions and native environments live (default "
        "`$XDG_CACHE_HOME/kit`, else `~/.cache/kit`)",
    ),
    Setting(("XDG_CACHE_HOME",), "the base of `KIT_CACHE`'s default"),
    Setting(
        ("KIT_CATALOGUE",),
        "the results catalogue `kit run` registers campaigns in (default "
        "`$KIT_CACHE/results.db`; `off`: none)",
    ),
    Setting(
        ("KIT_SQUASHFS_COMPRESSION",),
        "squashfs (and SIF) compression: `zstd:3` (default), `lz4`, `gzip[:level]`, "
        "`xz[:level]`, `zstd:LEVEL`",
    ),
    Setting(("KIT_CA_CERT",), "CA bundle for TLS inside builds (default: the host's bundle)"),
    Setting(
        ("PIP_INDEX_URL",), "a pip index for builds and native environments (default: pip's own)"
    ),
    Setting(
        ("KIT_DEBIAN_MIRROR",),
        "Debian mirror for `kit base`, `kit lock` (its index) and `ci/provision` "
        "(default: the host's apt source; a recipe's snapshot takes its place where "
        "`KIT_DEBIAN_SNAPSHOT` is set)",
    ),
    Setting(
        ("KIT_DEBIAN_SNAPSHOT",),
        "a Debian snapshot service's archive URL, under which each time is a folder: a "
        "recipe naming `debian_snapshot` then takes its packages from that time's archive "
        "(builds, `kit lock`, `kit bundle`; default: none, the mirror)",
    ),
    Setting(("KIT_ROOT",), "the checkout holding `recipes/`, `containers/`, `benchmarks/`"),
    Setting(
        ("KIT_USER", "KIT_PREFIX"), "the job user (`kit`) and install prefix (`/opt/kit`)", "ci/*"
    ),
    Setting(("KIT_SID_ROOT",), "the Apptainer wrapper's sid root", "ci/*"),
    Setting(
        ("KIT_DEMO_MINUTES", "KIT_DEMO_BUDGET", "KIT_DEMO_PRECISION", "KIT_DEMO_OUT"),
        "its whole time (10), the measuring budget (default: what the set-up leaves of the "
        "minutes, less one), the precision target (2%), the results directory",
        "ci/demo",
    ),
    Setting(
        ("KIT_NODE_MODULES",),
        "where the workflow linter's Node modules are (`/opt/kit/node`)",
        "ci/lint-workflows.mjs",
    ),
    Setting(
        ("KIT_REGISTRY",),
        "the registry host images are pushed to (none by default)",
        "ci/publish, GitHub Actions",
    ),
    Setting(
        ("KIT_PIP_EXTRA_INDEX_URL",),
        "a repository secret the workflows pass to pip as `PIP_EXTRA_INDEX_URL`",
        "GitHub Actions",
    ),
)

KIT_READS = frozenset(n for s in SETTINGS if s.read_by == "kit" for n in s.names)


def value(name: str) -> str | None:
    """The setting's value; None when it is unset or empty (an empty one means its
    default, as in a shell's ${VAR:-default})."""
    if name not in KIT_READS:
        raise KeyError(f"{name} is not a setting kit reads (kit.core.settings.SETTINGS)")
    return os.environ.get(name) or None


def said() -> str:
    """kit doctor's line: the settings kit reads that are set here (a site's module file or a
    user's profile may set them unseen), the rest at their defaults."""
    names = [n for s in SETTINGS for n in s.names if n in KIT_READS]
    given = ", ".join(f"{n}={v}" for n in names if (v := os.environ.get(n)))
    return f"settings: {given or 'none set'}; the rest at their defaults (docs/settings.md)"


def table() -> str:
    """The Markdown table docs/settings.md shows."""
    rows = ["| variable | read by | meaning |", "|---|---|---|"]
    for s in SETTINGS:
        names = ", ".join(f"`{n}`" for n in s.names)
        rows.append(f"| {names} | {s.read_by} | {s.meaning} |")
    return "\n".join(rows) + "\n"
