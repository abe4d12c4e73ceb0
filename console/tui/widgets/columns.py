"""Fixed-width text columns for the hot tables (a Rich Table costs ~10x more per render)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Span, Text

LineKey = tuple[str, tuple[Span, ...], object]


def line_key(line: Text) -> LineKey:
    """What a line looks like: its characters, style spans and base style."""
    return (line.plain, tuple(line.spans), line.style)


@dataclass(frozen=True)
class Column:
    header: str
    width: int | None
    """None: takes the width left over (shared equally among such columns)."""
    justify: str = "left"
    min_terminal: int = 0
    """The narrowest terminal that shows this column."""


def fit(value: Text | str, width: int, justify: str = "left") -> Text:
    """Exactly `width` cells: cut with an ellipsis when too long, padded otherwise."""
    text = value.copy() if isinstance(value, Text) else Text(value)
    if text.cell_len > width:
        text.truncate(max(0, width - 1))
        text.append("…")
        return text
    pad = width - text.cell_len
    if justify == "right":
        return Text(" " * pad) + text
    text.append(" " * pad)
    return text


def layout(columns: list[Column], total: int, gap: int = 1) -> list[int]:
    """Cell widths for columns fitting `total` cells."""
    fixed = sum(c.width for c in columns if c.width is not None)
    flexible = [c for c in columns if c.width is None]
    spare = max(0, total - fixed - gap * (len(columns) - 1))
    share = spare // len(flexible) if flexible else 0
    return [c.width if c.width is not None else max(4, share) for c in columns]


def render_row(cells: list[Text | str], columns: list[Column], widths: list[int]) -> Text:
    line = Text()
    for index, (cell, column, width) in enumerate(zip(cells, columns, widths, strict=True)):
        if index:
            line.append(" ")
        line.append_text(fit(cell, width, column.justify))
    return line


class RowCache:
    """`render_row` that keeps the rows it built: a row whose cells read as before is not
    rebuilt (on a steady host most GPU rows do not change from one second to the next)."""

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self._rows: dict[tuple[object, ...], Text] = {}

    def row(self, cells: list[Text | str], columns: list[Column], widths: list[int]) -> Text:
        key = (
            tuple(widths),
            tuple(c.justify for c in columns),
            *(c if isinstance(c, str) else line_key(c) for c in cells),
        )
        row = self._rows.get(key)
        if row is None:
            if len(self._rows) >= self.limit:
                self._rows.clear()
            row = self._rows[key] = render_row(cells, columns, widths)
        return row


def header_row(columns: list[Column], widths: list[int]) -> Text:
    line = render_row([c.header for c in columns], columns, widths)
    line.stylize("bold")
    return line
