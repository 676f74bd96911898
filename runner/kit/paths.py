"""Where kit finds its recipes and keeps generated artefacts."""

import os
from pathlib import Path


def repo_root() -> Path:
    """The checkout holding recipes/, containers/ and benchmarks/ (KIT_ROOT overrides)."""
    if "KIT_ROOT" in os.environ:
        return Path(os.environ["KIT_ROOT"])
    return Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """Converted images and native environments, keyed by digest (KIT_CACHE overrides)."""
    if "KIT_CACHE" in os.environ:
        return Path(os.environ["KIT_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kit"
