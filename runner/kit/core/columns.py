"""Plain-text tables as kit prints them to a terminal: columns two spaces apart."""

from collections.abc import Collection, Sequence

from kit.core.schema import printable


def aligned(
    rows: Sequence[Sequence[str]], indent: str = "", right: Collection[int] = ()
) -> list[str]:
    """Each row as a line, every column but the last padded to its widest cell (the last,
    often a long path or sentence, runs on; so does a shorter row's own last cell, a note
    under a row). Columns in `right` are right-aligned (sizes). A cell's control characters
    are spelt as escapes (schema.printable): a cell is read from a record or the catalogue
    (a host name holding a newline added a row to kit results ls, an escape sequence drove
    the terminal)."""
    cells = [[printable(v) for v in row] for row in rows]
    widths = [
        max((len(row[i]) for row in cells if i < len(row) - 1), default=0)
        for i in range(max(len(row) for row in cells) - 1)
    ]

    def line(row: list[str]) -> str:
        padded = [v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in
                  enumerate(zip(row[:-1], widths, strict=False))]  # fmt: skip
        return (indent + "  ".join([*padded, row[-1]])).rstrip()

    return [line(row) for row in cells]
