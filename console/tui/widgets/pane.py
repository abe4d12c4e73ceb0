"""A widget that shows pre-rendered lines and re-lays out only when its height changes.

Content is rendered to strips once per data update, at the pane's width; Textual's
compositor then only copies them. Only the lines that changed are repainted, and nothing
when nothing visible changed. (Rendering Rich content on every paint costs ~10x more; see
bench/tui.py.)
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget


class Pane(Widget):
    DEFAULT_CSS = """
    Pane { height: 1; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._text = Text()
        self._strips: list[Strip] = []
        self._width = 0
        self._source: RenderableType | None = None

    @property
    def text(self) -> Text:
        """What the pane shows, as styled text (what tests read)."""
        return self._text

    def put(self, renderable: RenderableType) -> None:
        """Show `renderable`, rendered once at the pane's width."""
        self._source = renderable
        width = max(1, self.size.width or self.app.size.width)
        if isinstance(renderable, Text):
            text = renderable.copy()
        else:
            text = Text("\n").join(self._render_text(renderable, width))
        text.no_wrap = True
        text.overflow = "crop"
        if text == self._text and width == self._width and self._strips:
            return
        before, width_before = self._strips, self._width
        self._text = text
        self._width = width
        console = self.app.console
        options = console.options.update(width=width, height=None, no_wrap=True)
        base = self.rich_style
        self._strips = [
            Strip(Segment.apply_style(line, base), width)
            for line in console.render_lines(text, options, style=None, pad=True, new_lines=False)
        ]
        if len(self._strips) != len(before):
            self.styles.height = max(1, len(self._strips))
            self.refresh()
        elif width != width_before:
            self.refresh()
        else:
            changed = [
                Region(0, y, width, 1)
                for y, (old, new) in enumerate(zip(before, self._strips, strict=True))
                if old != new
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
        if self._source is not None and self.size.width != self._width:
            self.put(self._source)

    def render_line(self, y: int) -> Strip:
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width, self.rich_style)
