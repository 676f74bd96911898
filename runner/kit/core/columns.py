"""Plain-text tables as kit prints them to a terminal: columns two spaces apart."""

from collections.abc import Sequence

from kit.core.schema import printable


def aligned(rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """Each row as a line, every column but the last padded to its widest cell (the last,
    often a long path or sentence, runs on). A cell's control characters are spelt as
    escapes (schema.printable): a cell is read from a record or the catalogue (a host name
    holding a newline added a row to kit results ls, an escape sequence drove the terminal)."""
    cells = [[printable(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]) - 1)]
    return [
        (
            indent + "  ".join([*(v.ljust(w) for v, w in zip(row, widths, strict=False)), row[-1]])
        ).rstrip()
        for row in cells
    ]
