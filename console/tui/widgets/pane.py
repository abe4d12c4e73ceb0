"""A widget that shows pre-rendered lines and re-lays out only when its height changes.

Content is rendered to strips line by line at the pane's width, and only lines that look
different from last time; Textual's compositor then only copies them. Only the lines that
changed are repainted, and nothing when nothing visible changed. (Rendering Rich content
on every paint costs ~10x more; see bench/tui.py.)
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from console.tui.widgets.columns import LineKey, line_key


class Pane(Widget):
    DEFAULT_CSS = """
    Pane { height: 1; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: list[Text] = []
        self._keys: list[LineKey] = []
        self._strips: list[Strip] = []
        self._width = 0
        self._source: RenderableType | list[Text] | None = None

    @property
    def text(self) -> Text:
        """What the pane shows, as styled text (what tests read)."""
        return Text("\n").join(self._lines)

    def put(self, renderable: RenderableType) -> None:
        """Show `renderable`, rendered at the pane's width."""
        width = max(1, self.size.width or self.app.size.width)
        if isinstance(renderable, Text):
            lines = list(renderable.split("\n", allow_blank=True))
        else:
            lines = self._render_text(renderable, width)
        self._show(lines, width)
        self._source = renderable

    def put_lines(self, lines: list[Text]) -> None:
        """Show one line per Text; a line that looks as it did last time is not rendered."""
        self._show(lines, max(1, self.size.width or self.app.size.width))
        self._source = lines

    def _show(self, lines: list[Text], width: int) -> None:
        keys = [line_key(line) for line in lines]
        if keys == self._keys and width == self._width and self._strips:
            return
        known = dict(zip(self._keys, self._strips, strict=True)) if width == self._width else {}
        before, width_before = self._strips, self._width
        console = self.app.console
        options = console.options.update(width=width, height=None, no_wrap=True, overflow="crop")
        base = self.rich_style
        strips = []
        for key, line in zip(keys, lines, strict=True):
            strip = known.get(key)
            if strip is None:
                rendered = console.render_lines(
                    line, options, style=None, pad=True, new_lines=False
                )
                strip = Strip(Segment.apply_style(rendered[0], base), width)
            strips.append(strip)
        self._lines, self._keys, self._strips, self._width = lines, keys, strips, width
        if len(strips) != len(before):
            self.styles.height = max(1, len(strips))
            self.refresh()
        elif width != width_before:
            self.refresh()
        else:
            changed = [
                Region(0, y, width, 1)
                for y, (old, new) in enumerate(zip(before, strips, strict=True))
                if old is not new and old != new
            ]
            if changed:
                self.refresh(*changed)

    def _render_text(self, renderable: RenderableType, width: int) -> list[Text]:
        console = self.app.console
        options = console.options.update(width=width, height=None)
        lines = console.render_lines(renderable, options, pad=False, new_lines=False)
        return [
            Text.assemble(*((s.text, s.style or "") for s in line if not s.control))
            for line in lines
        ]

    def on_resize(self) -> None:
        if self._source is None or self.size.width == self._width:
            return
        if isinstance(self._source, list):
            self.put_lines(self._source)
        else:
            self.put(self._source)

    def render_line(self, y: int) -> Strip:
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width, self.rich_style)
