"""The one-line `/` filter under a table: typing narrows it live, enter keeps the filter and
goes back to the table, escape clears it. While a filter is set the line stays, so the
filter in force is always on screen; its counter says how many rows (or matches) it keeps."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Static


class FilterInput(Input):
    """The bar's text field: escape and shift+enter are the bar's, not the screen's."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("shift+enter", "submit_back", "Previous match", show=False),
    ]

    def action_clear_filter(self) -> None:
        bar = self.parent
        if isinstance(bar, FilterBar):
            bar.clear()

    def action_submit_back(self) -> None:
        bar = self.parent
        if isinstance(bar, FilterBar):
            bar.post_message(FilterBar.Submitted(bar, self.value, backwards=True))
            bar.leave()


class FilterBar(Horizontal):
    DEFAULT_CSS = """
    FilterBar { height: 1; display: none; background: $boost; }
    FilterBar.shown { display: block; }
    FilterBar #filter-slash { width: 2; padding: 0 0 0 1; text-style: bold; }
    FilterBar FilterInput {
        border: none; height: 1; padding: 0; width: 1fr; background: $boost;
    }
    FilterBar FilterInput:focus { border: none; background: $surface; }
    FilterBar #filter-count { width: auto; padding: 0 1; color: $text-muted; }
    """

    class Changed(Message):
        """The filter text changed (every keystroke)."""

        def __init__(self, bar: FilterBar, text: str) -> None:
            super().__init__()
            self.bar = bar
            self.text = text

    class Submitted(Message):
        """Enter (or shift+enter, `backwards`) in the bar: keep the filter, go to a match."""

        def __init__(self, bar: FilterBar, text: str, *, backwards: bool = False) -> None:
            super().__init__()
            self.bar = bar
            self.text = text
            self.backwards = backwards

    def __init__(
        self, *, target: str | None = None, placeholder: str = "filter", id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.target = target
        """The id of the widget that gets the focus back on enter or escape."""
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        yield Static("/", id="filter-slash")
        yield FilterInput(placeholder=self.placeholder, id="filter-input")
        yield Static("", id="filter-count")

    @property
    def text(self) -> str:
        return self.query_one(FilterInput).value

    def open(self) -> None:
        """Show the bar and put the cursor in it."""
        self.add_class("shown")
        field = self.query_one(FilterInput)
        # At once, not on the next idle (as `focus()` does): keys typed right after `/`
        # (a paste, a fast typist) must reach the field, not the screen's bindings.
        self.screen.set_focus(field)
        field.cursor_position = len(field.value)

    def leave(self) -> None:
        """Back to the table; the bar stays while it holds a filter."""
        self.set_class(bool(self.text), "shown")
        targets = self.screen.query(f"#{self.target}") if self.target else None
        self.screen.set_focus(targets.first() if targets else None)

    def clear(self) -> None:
        """Empty the filter and hide the bar."""
        field = self.query_one(FilterInput)
        if field.value:
            field.value = ""  # posts Input.Changed, relayed as FilterBar.Changed
        self.set_count("")
        self.leave()

    def set_count(self, text: str) -> None:
        self.query_one("#filter-count", Static).update(Text(text))

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Changed(self, event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Submitted(self, event.value))
        self.leave()
