"""FindScreen.fill_found: the one filter → fill → keep the cursor → count step every table
screen (Servers, Runs, Bench's runs) goes through."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from console.tui.app import ConsoleApp
from console.tui.screens.servers import ServersScreen
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.finder import FindRow
from tests.tui.conftest import settle
from tests.tui.scene import SceneBackend
from tests.tui.test_filter_tables import row_keys


async def test_fill_found_filters_fills_keeps_the_cursor_and_counts(
    scene_backend: SceneBackend,
):
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ServersScreen)
        table = screen.query_one("#list", DataTable)
        rows = [
            FindRow(key, {"ID": key, "STATE": state}, search=hidden)
            for key, state, hidden in (
                ("a", "ready", ""),
                ("b", "failed", "needle"),
                ("c", "ready", "needle"),
            )
        ]
        screen.finder.text = "needle"
        keys = screen.fill_found(table, ("ID", "STATE"), rows, "c", "things")
        assert keys == ["b", "c"] == row_keys(table)
        assert table.cursor_row == 1  # still on c
        assert (
            str(screen.query_one(FilterBar).query_one("#filter-count", Static).content)
            == "2 of 3 things"
        )
        screen.finder.text = ""
        assert screen.fill_found(table, ("ID", "STATE"), rows, "gone", "things") == ["a", "b", "c"]
        assert str(screen.query_one(FilterBar).query_one("#filter-count", Static).content) == ""


async def test_a_heading_row_is_not_counted(scene_backend: SceneBackend):
    """A host's row heads its servers: `N of M servers` counts the servers only."""
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ServersScreen)
        table = screen.query_one("#list", DataTable)
        rows = [
            FindRow("local-1", {"ID": "local-1", "STATE": "ready"}),
            FindRow("host:alpha", {"ID": "alpha up", "STATE": ""}, counted=False),
            FindRow("a-1", {"ID": "a-1", "STATE": "ready"}, search="alpha", follows="host:alpha"),
            FindRow("a-2", {"ID": "a-2", "STATE": "failed"}, search="alpha", follows="host:alpha"),
        ]
        screen.finder.text = "alpha"
        screen.fill_found(table, ("ID", "STATE"), rows, None, "servers")
        count = screen.query_one(FilterBar).query_one("#filter-count", Static).content
        assert str(count) == "2 of 3 servers"
