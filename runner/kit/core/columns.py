"""Plain-text tables as kit prints them to a terminal: columns two spaces apart."""

from collections.abc import Sequence


def aligned(rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """Each row as a line, every column but the last padded to its widest cell (the last,
    often a long path or sentence, runs on)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        (
            indent + "  ".join([*(v.ljust(w) for v, w in zip(row, widths, strict=False)), row[-1]])
        ).rstrip()
        for row in rows
    ]
