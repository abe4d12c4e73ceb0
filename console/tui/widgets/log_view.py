"""A scrolling log of styled lines, drawn only where it is seen.

Lines are kept as Rich Text and rendered to strips when a frame shows them (a cache keeps
what was shown), so a line can be restyled in place (the current search match) and the
whole log wrapped or unwrapped at the pane's width without writing it again.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Iterable

from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip


class LogView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    LogView {
        background: $surface;
        color: $foreground;
        overflow-y: scroll;
        &:focus { background-tint: $foreground 5%; }
    }
    """

    def __init__(self, max_lines: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lines: deque[Text] = deque(maxlen=max_lines)
        self._first = 0
        """The absolute number of the oldest line kept (lines dropped before it)."""
        self.wrap = False
        """Long lines wrap at the pane's width (else they run off, scrolled sideways)."""
        self.auto_scroll = True
        self._widest = 0
        self._heights: deque[int] = deque(maxlen=max_lines)
        """Strips per line when wrapping (one each otherwise)."""
        self._starts: list[int] | None = None
        """First strip of each line when wrapping; rebuilt when lines come or go."""
        self._strips: LRUCache[tuple[int, int, int, bool], list[Strip]] = LRUCache(4096)
        self._edits: dict[int, int] = {}
        """Restyles per line number: part of its cache key, so a restyled line is drawn anew."""
        self._wrapped_at = 0

    @property
    def line_count(self) -> int:
        return len(self._lines)

    def line(self, index: int) -> Text:
        """Line `index` (0 is the oldest kept) as it is styled now."""
        return self._lines[index]

    def _width(self) -> int:
        return max(1, self.scrollable_content_region.width)

    def _line_strips(self, number: int, text: Text) -> list[Strip]:
        """Line `number` (absolute) as strips: one unless wrapping."""
        width = self._width() if self.wrap else max(1, text.cell_len)
        key = (number, self._edits.get(number, 0), width, self.wrap)
        cached = self._strips.get(key)
        if cached is None:
            console = self.app.console
            options = console.options.update(
                width=width, no_wrap=not self.wrap, overflow="fold" if self.wrap else "ignore"
            )
            lines = console.render_lines(text, options, pad=False, new_lines=False)
            cached = [Strip(line) for line in lines] or [Strip.blank(0)]
            self._strips.set(key, cached)
        return cached

    def _resize_virtual(self) -> None:
        if self.wrap:
            self.virtual_size = Size(self._width(), sum(self._heights))
        else:
            self.virtual_size = Size(self._widest, len(self._lines))

    def append(self, lines: Iterable[Text], scroll_end: bool | None = None) -> None:
        for text in lines:
            if len(self._lines) == self._lines.maxlen:
                self._first += 1
            self._lines.append(text)
            self._widest = max(self._widest, text.cell_len)
            number = self._first + len(self._lines) - 1
            self._heights.append(len(self._line_strips(number, text)) if self.wrap else 1)
        self._starts = None
        self._resize_virtual()
        self.refresh()
        if self.auto_scroll if scroll_end is None else scroll_end:
            self.scroll_end(animate=False, immediate=False, x_axis=False)

    def clear(self) -> None:
        self._first += len(self._lines)
        self._edits.clear()
        self._lines.clear()
        self._heights.clear()
        self._starts = None
        self._widest = 0
        self._resize_virtual()
        self.refresh()

    def restyle(self, index: int, text: Text) -> None:
        """Show `text` in place of line `index` (the same characters, other styles)."""
        if 0 <= index < len(self._lines):
            self._lines[index] = text
            number = self._first + index
            self._edits[number] = self._edits.get(number, 0) + 1
            self.refresh()

    def set_wrap(self, wrap: bool) -> None:
        self.wrap = wrap
        self._rewrap()

    def _rewrap(self) -> None:
        self._wrapped_at = self._width()
        if self.wrap:
            heights = (
                len(self._line_strips(self._first + i, t)) for i, t in enumerate(self._lines)
            )
            self._heights = deque(heights, maxlen=self._lines.maxlen)
        else:
            self._heights = deque((1 for _ in self._lines), maxlen=self._lines.maxlen)
        self._starts = None
        self._resize_virtual()
        self.refresh()

    def on_resize(self) -> None:
        if self.wrap and self._width() != self._wrapped_at:
            self._rewrap()

    def line_y(self, index: int) -> int:
        """The first row of line `index` in the scrolled content."""
        if not self.wrap:
            return index
        return self._line_starts()[index] if 0 <= index < len(self._lines) else 0

    def _line_starts(self) -> list[int]:
        if self._starts is None:
            starts, total = [], 0
            for height in self._heights:
                starts.append(total)
                total += height
            self._starts = starts
        return self._starts

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        if self.wrap:
            starts = self._line_starts()
            index = bisect_right(starts, row) - 1
            if not 0 <= index < len(self._lines):
                return Strip.blank(width, self.rich_style)
            strips = self._line_strips(self._first + index, self._lines[index])
            sub = row - starts[index]
            strip = strips[sub] if sub < len(strips) else Strip.blank(width)
            return strip.crop_extend(0, width, self.rich_style).apply_style(self.rich_style)
        if not 0 <= row < len(self._lines):
            return Strip.blank(width, self.rich_style)
        strip = self._line_strips(self._first + row, self._lines[row])[0]
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style).apply_style(
            self.rich_style
        )
