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
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def test_a_changed_line_reaches_the_screen_and_the_rest_stays():
    app = PaneApp()
    async with app.run_test(size=(40, 6)) as pilot:
        pane = app.query_one(Pane)
        pane.put(Text("gpu 0   5%\ngpu 1  10%\ngpu 2  15%"))
        await pilot.pause()
        assert [line.rstrip() for line in screen_lines(app)[:3]] == [
            "gpu 0   5%",
            "gpu 1  10%",
            "gpu 2  15%",
        ]
        pane.put(Text("gpu 0   5%\ngpu 1  97%\ngpu 2  15%"))
        await pilot.pause()
        assert [line.rstrip() for line in screen_lines(app)[:3]] == [
            "gpu 0   5%",
            "gpu 1  97%",
            "gpu 2  15%",
        ]
        # A line more: the pane grows and every line is shown.
        pane.put(Text("gpu 0   5%\ngpu 1  97%\ngpu 2  15%\ngpu 3   0%"))
        await pilot.pause()
        assert screen_lines(app)[3].rstrip() == "gpu 3   0%"
        assert pane.size.height == 4
