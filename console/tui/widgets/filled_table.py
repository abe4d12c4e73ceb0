"""Filling a DataTable with columns as wide as what they hold.

A DataTable that sizes its columns itself measures new rows only when idle; a frame painted
in between shows the header at the old widths, and the header can stay so (its line is
cached). Fixed widths, measured here, leave nothing to catch up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable

Cell = str | Text


def _width(cell: Cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


def fill_table(
    table: DataTable[Any],
    columns: Sequence[str],
    rows: Sequence[tuple[str, Sequence[Cell]]],
    header: Callable[[str], str] = str,
) -> None:
    """Replace the table's columns and rows; each row is (key, cells in column order).
    `header` labels a column (a sort mark, say); the column's key stays its name."""
    table.clear(columns=True)
    for index, name in enumerate(columns):
        label = header(name)
        width = max([cell_len(label), *(_width(cells[index]) for _, cells in rows)])
        table.add_column(label, width=width, key=name)
    for key, cells in rows:
        # A plain string is shown as it is: DataTable would read it as markup, and a cell
        # holding `[/]` (a run name from another host, say) would fail the paint.
        table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells), key=key)
