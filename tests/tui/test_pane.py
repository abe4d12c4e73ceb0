"""The Pane repaints only the lines that changed; what reaches the screen must still be
the new text (a wrong line region would leave the old line on the terminal)."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from console.tui.widgets.columns import Column, RowCache
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


async def test_put_lines_renders_only_lines_that_look_different():
    app = PaneApp()
    async with app.run_test(size=(40, 6)) as pilot:
        pane = app.query_one(Pane)
        pane.put_lines([Text("gpu 0   5%"), Text("gpu 1  10%", style="bold")])
        await pilot.pause()
        first = list(pane._strips)
        # Same look, new objects: reused. Same characters in another style: rendered again.
        pane.put_lines([Text("gpu 0   5%"), Text("gpu 1  10%", style="red")])
        await pilot.pause()
        assert pane._strips[0] is first[0]
        assert pane._strips[1] is not first[1]
        assert screen_lines(app)[:2] == ["gpu 0   5%", "gpu 1  10%"]
        assert pane.text.plain == "gpu 0   5%\ngpu 1  10%"
        await pilot.resize_terminal(30, 6)
        await pilot.pause()
        assert all(strip.cell_length == 30 for strip in pane._strips)


def test_row_cache_rebuilds_a_row_only_when_its_cells_read_differently():
    columns = [Column("GPU", 3, "right"), Column("UTIL", 4, "right")]
    rows = RowCache()
    first = rows.row(["0", Text("5%", style="yellow")], columns, [3, 4])
    assert first.plain == "  0   5%"
    assert rows.row(["0", Text("5%", style="yellow")], columns, [3, 4]) is first
    restyled = rows.row(["0", Text("5%", style="red")], columns, [3, 4])
    assert restyled is not first
    assert restyled.spans != first.spans
    assert rows.row(["0", Text("95%")], columns, [3, 4]).plain == "  0  95%"
    assert rows.row(["0", Text("5%", style="yellow")], columns, [4, 4]).plain == "   0   5%"
