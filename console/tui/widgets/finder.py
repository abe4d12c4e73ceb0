"""A table's filter text and sort column: what `/`, `o` and `O` change, as htop, nvitop and
k9s do. Pure (no widgets): the screens build their rows, the finder narrows and orders them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rich.text import Text

Cell = str | Text
SortValue = tuple[int, float, str]
"""(0, number, "") for a cell that reads as a number, (1, 0, text) otherwise: numbers first,
then text, each in its natural order."""

_NUMBER = re.compile(r"^\s*[-+]?(\d+(?:\.\d+)?)")
UP, DOWN = "▲", "▼"


def plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def sort_value(value: Cell | float | None) -> SortValue:
    """How a cell orders: a number by its value, text case-insensitively, blanks last."""
    if value is None:
        return (2, 0.0, "")
    if isinstance(value, int | float):
        return (0, float(value), "")
    text = plain(value).strip()
    found = _NUMBER.match(text)
    if found is not None and not text[found.end() :].strip(" %WCGMkB/s"):
        return (0, float(text[: found.end()]), "")
    if text in ("", "-"):
        return (2, 0.0, "")
    return (1, 0.0, text.lower())


@dataclass(frozen=True)
class FindRow:
    """One table row: its key, its cells by column, and any cell's sort value where the
    text does not order right (durations, sizes)."""

    key: str
    cells: Mapping[str, Cell]
    sort: Mapping[str, SortValue] = field(default_factory=dict)
    search: str = ""
    """Text the filter also matches but no cell shows in full (a run id or name cut to fit
    a narrow column), so a row is found by what it is, not by what fits on screen."""
    follows: str | None = None
    """The key of the row this one belongs under (a gang's node under its head, a server
    under its host): it is sorted only among that row's followers, is shown right after
    that row, and keeps it listed when the filter matches only the follower (a follower the
    filter does not match is then left out)."""
    sorts_followers: bool = False
    """Whether this row's followers are sorted among themselves (a host's servers); else
    they keep the order they come in (a gang's nodes by rank)."""
    counted: bool = True
    """Whether it is one of the things a filter's `N of M` counts (a host's heading row or
    a note is not)."""

    def matches(self, needle: str) -> bool:
        shown = " ".join(plain(c) for c in self.cells.values())
        return needle in f"{shown} {self.search}".lower()

    def value(self, column: str) -> SortValue:
        if column in self.sort:
            return self.sort[column]
        return sort_value(self.cells.get(column))


@dataclass
class Finder:
    text: str = ""
    """The filter: rows whose cells contain it (case-insensitive) are shown."""
    column: str | None = None
    """The sort column; None keeps the rows in the order they come."""
    descending: bool = False

    @property
    def active(self) -> bool:
        return bool(self.text)

    def cycle(self, columns: Sequence[str]) -> str | None:
        """The next sort column (after the last, back to no sort); returns it."""
        current = self.column
        if not columns:
            self.column = None
        elif current is None or current not in columns:
            self.column = columns[0]
        else:
            index = list(columns).index(current) + 1
            self.column = columns[index] if index < len(columns) else None
        self.descending = False
        return self.column

    def reverse(self, columns: Sequence[str]) -> None:
        """Reverse the order (sorting by the first column if none is chosen yet)."""
        if self.column is None and columns:
            self.column = columns[0]
            self.descending = True
        else:
            self.descending = not self.descending

    def apply(self, rows: Sequence[FindRow]) -> list[FindRow]:
        """The rows the filter keeps, in sort order (a stable sort: ties keep their order)."""
        needle = self.text.lower()
        followers: dict[str, list[FindRow]] = {}
        for row in rows:
            if row.follows is not None:
                followers.setdefault(row.follows, []).append(row)
        leaders = [row for row in rows if row.follows is None]
        kept = (
            [
                row
                for row in leaders
                if row.matches(needle) or any(f.matches(needle) for f in followers.get(row.key, ()))
            ]
            if needle
            else leaders
        )
        kept = self._sorted(kept)
        return [shown for row in kept for shown in (row, *self._followers(row, followers, needle))]

    def _followers(
        self, row: FindRow, followers: Mapping[str, Sequence[FindRow]], needle: str
    ) -> list[FindRow]:
        """A kept row's followers (sorted among themselves if the row says so): all of them
        when the filter is empty or matches the row itself (a gang's nodes under a matching
        head, a host's servers under its name), else only those the filter matches."""
        mine = list(followers.get(row.key, ()))
        if needle and not row.matches(needle):
            mine = [f for f in mine if f.matches(needle)]
        return self._sorted(mine) if row.sorts_followers else mine

    def _sorted(self, kept: list[FindRow]) -> list[FindRow]:
        column = self.column
        if column is not None:
            blanks = [row for row in kept if row.value(column)[0] == 2]
            valued = [row for row in kept if row.value(column)[0] != 2]
            valued.sort(key=lambda row: row.value(column), reverse=self.descending)
            kept = valued + blanks
        return kept

    def header(self, column: str) -> str:
        """The column's header, with ▲ or ▼ when the table is sorted by it."""
        if column != self.column:
            return column
        return f"{column}{DOWN if self.descending else UP}"
