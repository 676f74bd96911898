"""Numbers users type: percentages and durations, parsed strictly with one-line errors."""

import math
import re

from kit.core.errors import KitError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|min|h)?")
_SCALE = {None: 1, "s": 1, "m": 60, "min": 60, "h": 3600}


def percent(flag: str, text: str) -> float:
    """'2%' or '0.02' -> 0.02; a KitError for anything not in (0, 100 %)."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise KitError(f"{flag} '{text}' must be a percentage above 0 and below 100, e.g. 2%")
    return value


def duration(flag: str, text: str) -> float:
    """'30m', '90s', '1.5h' or '600' (seconds) -> seconds; a KitError unless positive."""
    m = _DURATION.fullmatch(text.strip())
    seconds = float(m.group(1)) * _SCALE[m.group(2)] if m else 0.0
    if not 0 < seconds < math.inf:
        raise KitError(f"{flag} '{text}' must be a positive duration, e.g. 30m, 90s or 1h")
    return seconds


def minutes(seconds: float) -> str:
    """A budget as it was given: 90 s -> '1.5 min', 1200 s -> '20 min', 100 s -> '1.67 min'."""
    return f"{round(seconds / 60, 2):g} min"
