"""What the table screens share to find things: `/` filters, `o` sorts, `O` reverses.

A screen lists `FIND_BINDINGS` in its own BINDINGS (the help and the key bar read them
there), composes a `FilterBar`, and builds its rows through `self.finder`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Input

from console.tui.backend import Backend
from console.tui.screens.base import ConsoleScreen
from console.tui.widgets.filled_table import fill_table
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.finder import Finder, FindRow

FIND_BINDINGS: list[Binding] = [
    # A priority binding: the app handles it before it passes the next keys on, so what is
    # typed straight after `/` (a fast typist, a paste) lands in the filter.
    Binding("slash", "find", "Filter", key_display="/", priority=True),
    Binding("o", "sort", "Sort"),
    Binding("O", "sort_reverse", "Reverse sort", show=False),
    Binding("escape", "clear_filter", "Clear filter", show=False),
]


def typing(screen: Screen[Any]) -> bool:
    """A text field has the focus: `/` is a character there, not a key binding."""
    return isinstance(screen.focused, Input)


class FindScreen(ConsoleScreen):
    SORT_COLUMNS: ClassVar[tuple[str, ...]] = ()
    """The columns `o` cycles through, in order."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.finder = Finder()

    def sort_columns(self) -> Sequence[str]:
        return self.SORT_COLUMNS

    def apply_find(self) -> None:
        """Show the rows again under the finder's filter and order."""
        self.refresh_data()

    def fill_found(
        self,
        table: DataTable[Any],
        columns: Sequence[str],
        rows: Sequence[FindRow],
        keep: str | None,
        what: str,
    ) -> list[str]:
        """Filter and sort `rows`, fill `table` with their `columns`, put the cursor back
        on the row keyed `keep` if it is still listed, and show the count; returns the
        shown rows' keys, in order."""
        found = self.finder.apply(rows)
        fill_table(
            table,
            columns,
            [(row.key, [row.cells[c] for c in columns]) for row in found],
            self.finder.header,
        )
        keys = [row.key for row in found]
        if keep is not None and keep in keys:
            table.move_cursor(row=keys.index(keep))
        self.show_count(
            sum(1 for row in found if row.counted), sum(1 for row in rows if row.counted), what
        )
        return keys

    def show_count(self, shown: int, total: int, what: str = "rows") -> None:
        for bar in self.query(FilterBar):
            bar.set_count(f"{shown} of {total} {what}" if self.finder.active else "")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "find" and typing(self))

    def action_find(self) -> None:
        self.query_one(FilterBar).open()

    def action_sort(self) -> None:
        self.finder.cycle(self.sort_columns())
        self.apply_find()

    def action_sort_reverse(self) -> None:
        self.finder.reverse(self.sort_columns())
        self.apply_find()

    def action_clear_filter(self) -> None:
        """Escape: clear the filter if there is one, else leave the focused field."""
        if self.finder.active:
            self.query_one(FilterBar).clear()
        else:
            self.escape_fallback()

    def escape_fallback(self) -> None:
        self.set_focus(None)

    def on_filter_bar_changed(self, event: FilterBar.Changed) -> None:
        if event.text != self.finder.text:
            self.finder.text = event.text
            self.apply_find()
