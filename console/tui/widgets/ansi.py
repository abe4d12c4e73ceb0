"""ANSI text as Textual strips, decoding each distinct escape sequence once.

plotext draws a chart as ANSI text and ends every run of one colour with a reset, so each
run's style is fully given by the escape codes in front of it. Rich decodes those codes
(once per distinct sequence); the runs become segments directly. Going through
`Text.from_ansi` and Textual's content layer instead costs about two thirds of a chart
redraw.
"""

from __future__ import annotations

import re

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

_RUN = re.compile(r"((?:\x1b\[[0-9;]*m)*)([^\x1b]*)")


class AnsiStrips:
    """Converts ANSI lines to strips; keeps the decoded style of every escape sequence seen."""

    def __init__(self) -> None:
        self._styles: dict[str, Style] = {}

    def style(self, codes: str) -> Style:
        style = self._styles.get(codes)
        if style is None:
            decoded = Text.from_ansi(codes + " ")
            spans = [span.style for span in decoded.spans if isinstance(span.style, Style)]
            style = self._styles[codes] = Style.combine(spans) if spans else Style()
        return style

    def strips(self, ansi: str, width: int, base: Style) -> list[Strip]:
        """One strip per line, `base` under every run, each padded or cropped to `width`."""
        strips = []
        for line in ansi.splitlines():
            segments = [
                Segment(text, base + self.style(codes))
                for codes, text in _RUN.findall(line)
                if text
            ]
            strips.append(Strip(segments).adjust_cell_length(width, base))
        return strips
