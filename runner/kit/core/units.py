"""Numbers users type: percentages, durations and sizes, parsed strictly with one-line errors."""

import math
import re

from kit.core.errors import KitError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|min|h|d)?")
_SCALE = {None: 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)b?", re.IGNORECASE)
_POWER = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


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
    """'30m', '90s', '1.5h', '30d' or '600' (seconds) -> seconds; a KitError unless positive."""
    m = _DURATION.fullmatch(text.strip())
    seconds = float(m.group(1)) * _SCALE[m.group(2)] if m else 0.0
    if not 0 < seconds < math.inf:
        raise KitError(
            f"{flag} '{text}' must be a positive duration in s, m, h or d, e.g. 30m, 90s, 1h or 30d"
        )
    return seconds


def size(flag: str, text: str) -> int:
    """'20G', '500MB', '1.5T', '8GiB' or '4096' (bytes) -> bytes: K, M, G, T are powers of
    1000 (as kit prints sizes), KiB, MiB, GiB, TiB of 1024; a KitError unless positive."""
    m = _SIZE.fullmatch(text.strip())
    value = 0.0
    if m and (m.group(2) or not m.group(3)):  # 'iB' alone is no unit
        base = 1024 if m.group(3) else 1000
        value = float(m.group(1)) * base ** _POWER[m.group(2).lower()]
    if not 1 <= value < math.inf:
        raise KitError(
            f"{flag} '{text}' must be a size in B, K, M, G or T (powers of 1000; KiB, MiB, "
            "GiB, TiB: of 1024), e.g. 20G or 500M"
        )
    return int(value)


def minutes(seconds: float) -> str:
    """A budget as it was given: 90 s -> '1.5 min', 1200 s -> '20 min', 100 s -> '1.67 min'."""
    return f"{round(seconds / 60, 2):g} min"


def size_text(n: int) -> str:
    """Bytes as kit prints sizes (powers of 1000): 1234 -> '1.2 kB', 3.1e9 -> '3.10 GB'."""
    for unit, scale, digits in (("TB", 1e12, 2), ("GB", 1e9, 2), ("MB", 1e6, 1), ("kB", 1e3, 1)):
        if n >= scale:
            return f"{n / scale:.{digits}f} {unit}"
    return f"{n} B"
