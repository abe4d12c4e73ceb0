"""The Pane repaints only the lines that changed; what reaches the screen must still be
the new text (a wrong line region would leave the old line on the terminal)."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from console.tui.widgets.pane import Pane


class PaneApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Pane(id="pane")


def screen_lines(app: App[None]) -> list[str]:
    """The screen as the terminal would show it, one string per row."""
    return [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]


async def test_a_changed_line_reaches_the_screen_and_the_rest_stays():
    app = PaneApp()
    async with app.run_test(size=(40, 6)) as pilot:
        pane = app.query_one(Pane)
        shown = ["gpu 0   5%", "gpu 1  10%", "gpu 2  15%"]
        # Every line new; then one changed; then one more line (the pane grows).
        for lines in (shown, [shown[0], "gpu 1  97%", shown[2]], [*shown, "gpu 3   0%"]):
            pane.put(Text("\n".join(lines)))
            await pilot.pause()
            assert screen_lines(app)[: len(lines)] == lines
            assert pane.size.height == len(lines)
