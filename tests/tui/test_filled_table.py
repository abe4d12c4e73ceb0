"""A filled DataTable: each column as wide as its widest cell, the header lined up with it."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from console.tui.widgets.filled_table import fill_table


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield DataTable(id="table")


async def test_columns_fit_their_widest_cell_and_the_header_lines_up():
    app = TableApp()
    async with app.run_test(size=(70, 6)) as pilot:
        table = app.query_one(DataTable)
        rows: list[tuple[str, list[str | Text]]] = [
            ("a", ["20261129-185848-qwen-b15-recheck", Text("running", style="bold")]),
            ("b", ["short", "done"]),
        ]
        fill_table(table, ["RUN", "STATUS"], rows)
        await pilot.pause()
        assert [c.width for c in table.columns.values()] == [32, 7]
        screen = [strip.text for strip in app.screen._compositor.render_strips()]
        assert screen[0].index("STATUS") == screen[1].index("running")
        assert screen[2].index("done") == screen[1].index("running")
        # Refilled with other columns: the old ones are gone, the cursor row is 0.
        fill_table(table, ["NAME"], [("c", ["x"])])
        await pilot.pause()
        assert [str(c.label) for c in table.columns.values()] == ["NAME"]
        assert table.row_count == 1
