"""The footer line: the bindings that apply on this screen, clickable.

One widget rendering one line of text. Textual's Footer mounts a widget per key and
restyles each on every screen switch and focus change, which cost most of a screen switch.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widgets import Static

KeyItem = tuple[str, str, bool, str]
"""(key as shown, description, enabled, key name)."""


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        width: 1fr;
        background: $footer-background;
        color: $footer-foreground;
    }
    KeyBar > .keybar--key {
        color: $footer-key-foreground;
        background: $footer-key-background;
        text-style: bold;
    }
    KeyBar > .keybar--description {
        color: $footer-description-foreground;
        background: $footer-description-background;
    }
    KeyBar > .keybar--disabled {
        color: $text-disabled;
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "keybar--key",
        "keybar--description",
        "keybar--disabled",
    }

    def __init__(self) -> None:
        super().__init__("")
        self._targets: list[tuple[int, int, str]] = []
        """(first cell, end cell, key) of each shown binding, for clicks."""

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.show_keys()

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if screen is self.screen:
            self.show_keys()

    def on_resize(self) -> None:
        self.show_keys()

    def show_keys(self) -> None:
        """Screen keys first, then the app's; what does not fit is left out whole, and
        then `?` (help, which lists every key) keeps its place at the end."""
        key_style = self.get_component_rich_style("keybar--key")
        description_style = self.get_component_rich_style("keybar--description")
        disabled_style = self.get_component_rich_style("keybar--disabled")
        items: list[KeyItem] = []
        seen: set[str] = set()
        palette = None
        for _node, binding, enabled, _tooltip in self.screen.active_bindings.values():
            if binding.key == self.app.COMMAND_PALETTE_BINDING:
                palette = binding
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            items.append(
                (self.app.get_key_display(binding), binding.description, enabled, binding.key)
            )
        if palette is not None and self.app.ENABLE_COMMAND_PALETTE:
            items.append(
                (self.app.get_key_display(palette), palette.description, True, palette.key)
            )
        width = self.size.width or self.app.size.width
        items = _fitting(items, width)
        line = Text(no_wrap=True, end="")
        targets: list[tuple[int, int, str]] = []
        for key_display, description, enabled, key in items:
            start = line.cell_len
            line.append(f" {key_display} ", key_style)
            line.append(f"{description} ", description_style if enabled else disabled_style)
            targets.append((start, line.cell_len, key))
        self._targets = targets
        self.update(line)

    def on_click(self, event: events.Click) -> None:
        for start, end, key in self._targets:
            if start <= event.x < end:
                self.app.simulate_key(key)
                return


def _cells(item: KeyItem) -> int:
    return len(item[0]) + len(item[1]) + 3


def _fitting(items: list[KeyItem], width: int) -> list[KeyItem]:
    """The items that fit in `width`, in their order; when some must go, help stays."""
    if sum(_cells(item) for item in items) <= width:
        return items
    help_item = next((item for item in items if item[3] == "question_mark"), None)
    room = width - (_cells(help_item) if help_item else 0)
    shown: list[KeyItem] = []
    for item in items:
        if item is help_item:
            shown.append(item)
            continue
        if _cells(item) > room:
            break
        shown.append(item)
        room -= _cells(item)
    if help_item is not None and help_item not in shown:
        shown.append(help_item)
    return shown
