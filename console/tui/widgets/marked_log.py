"""A RichLog whose lines can be restyled in place: the current search match is marked
without writing the whole log again (thousands of lines cost a visible pause)."""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.strip import Strip
from textual.widgets import RichLog


class MarkedLog(RichLog):
    def restyle(self, index: int, line: Text) -> None:
        """Show `line` in place of line `index` (one log line, as written, unwrapped)."""
        if not 0 <= index < len(self.lines):
            return
        width = max(1, self.lines[index].cell_length)
        console = self.app.console
        options = console.options.update(overflow="ignore", no_wrap=True).update_width(width)
        rendered = list(Segment.split_lines(console.render(line, options)))
        if len(rendered) != 1:
            return
        self.lines[index] = Strip(rendered[0])
        self._line_cache.clear()
        self.refresh()
