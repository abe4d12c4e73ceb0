"""`/` on every table: typing narrows the rows live, the filter and its count stay in view,
escape clears it; in Logs it highlights matches with a `match n of M` counter."""

from __future__ import annotations

from textual import events
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Static

from console.tui.app import ConsoleApp
from console.tui.screens.logs import LogsScreen
from console.tui.widgets.filter_bar import FilterBar, FilterInput
from console.tui.widgets.log_view import LogView
from tests.tui.conftest import settle
from tests.tui.scene import A, B, C, SceneBackend


def row_keys(table: DataTable[object]) -> list[str]:
    return [
        str(table.coordinate_to_cell_key(Coordinate(row, 0)).row_key.value)
        for row in range(table.row_count)
    ]


def bar_count(app: ConsoleApp) -> str:
    return str(app.screen.query_one("#filter-count", Static).content)


async def test_servers_filter_narrows_live_and_escape_clears(scene_backend: SceneBackend):
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#list", DataTable)
        assert row_keys(table) == [A, B, C]
        await pilot.press("slash", *"tp")
        await settle(pilot)
        assert row_keys(table) == [A, B, C]  # every id holds "tp"
        await pilot.press(*"4")
        await settle(pilot)
        assert row_keys(table) == [B]
        assert bar_count(app) == "1 of 3 servers"
        # Enter goes back to the table; the filter stays, and stays on screen.
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen.focused is table
        bar = app.screen.query_one(FilterBar)
        assert bar.has_class("shown")
        assert bar.text == "tp4"
        assert row_keys(table) == [B]
        await pilot.press("escape")
        await settle(pilot)
        assert row_keys(table) == [A, B, C]
        assert not bar.has_class("shown")


async def test_servers_filter_matches_state_and_says_when_nothing_does(
    scene_backend: SceneBackend,
):
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"FAILED")
        await settle(pilot)
        table = app.screen.query_one("#list", DataTable)
        assert row_keys(table) == [C]  # case-insensitive, any column
        await pilot.press(*"xyz")
        await settle(pilot)
        assert table.row_count == 0
        assert bar_count(app) == "0 of 3 servers"
        assert "no server matches /FAILEDxyz/" in str(
            app.screen.query_one("#detail-text", Static).content
        )
        # Escape in the bar clears the filter and hides the bar.
        await pilot.press("escape")
        await settle(pilot)
        assert table.row_count == 3
        assert not app.screen.query_one(FilterBar).has_class("shown")


async def test_runs_filter_keeps_the_detail_on_a_shown_run(scene_backend: SceneBackend):
    app = ConsoleApp(scene_backend, mode="runs")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#runs", DataTable)
        assert row_keys(table) == [
            "20261129-185848-qwen-b15-recheck",
            "20261129-185811-qwen-ddtree-budgets",
        ]
        await pilot.press("slash", *"budgets", "enter")
        await settle(pilot)
        assert row_keys(table) == ["20261129-185811-qwen-ddtree-budgets"]
        assert bar_count(app) == "1 of 2 runs"
        assert app.screen.selected_id() == "20261129-185811-qwen-ddtree-budgets"  # type: ignore[attr-defined]
        assert app.screen.shown == "20261129-185811-qwen-ddtree-budgets"  # type: ignore[attr-defined]


async def test_gpu_filter_keeps_matching_gpus_and_their_numa_node(scene_backend: SceneBackend):
    app = ConsoleApp(scene_backend)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        await pilot.press("slash", *B)
        await settle(pilot)
        text = app.screen.query_one("#gpus").text.plain  # type: ignore[attr-defined]
        gpu_rows = [line.split()[0] for line in text.splitlines()[1:] if line.strip()[:1].isdigit()]
        assert gpu_rows == ["4", "5", "6", "7"]
        assert "NUMA 1" in text
        assert "NUMA 0" not in text
        assert bar_count(app) == "4 of 8 GPUs"
        await pilot.press("escape")
        await settle(pilot)
        text = app.screen.query_one("#gpus").text.plain  # type: ignore[attr-defined]
        assert "NUMA 0" in text
        assert "NUMA 1" in text


def _styles(log: LogView, index: int) -> set[str]:
    """The styles line `index` is drawn with (its spans and its own)."""
    line = log.line(index)
    return {str(span.style) for span in line.spans} | {str(line.style)}


async def test_logs_search_counts_matches_and_marks_the_current_one(
    scene_backend: SceneBackend,
):
    app = ConsoleApp(scene_backend, mode="logs")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LogsScreen)
        screen.show_server(A)
        await settle(pilot)
        assert len(screen.lines) == 41
        await pilot.press("slash", *"decode batch")
        await settle(pilot)
        assert bar_count(app) == "40 matches (enter, n/N jump)"
        await pilot.press("enter")
        await settle(pilot)
        assert screen.match_at == 0
        assert bar_count(app) == "match 1 of 40"
        assert isinstance(screen.focused, LogView)
        log = screen.query_one(LogView)
        assert any("dark_orange3" in style for style in _styles(log, 0))
        await pilot.press("n", "n")
        await settle(pilot)
        assert screen.match_at == 2
        assert bar_count(app) == "match 3 of 40"
        # Only the current match has the current colour; the one before is a plain match.
        assert any("dark_orange3" in style for style in _styles(log, 2))
        assert not any("dark_orange3" in style for style in _styles(log, 0))
        assert any("yellow" in style for style in _styles(log, 0))
        await pilot.press("N")
        await settle(pilot)
        assert bar_count(app) == "match 2 of 40"
        await pilot.press("enter")  # enter on the log: the next match
        await settle(pilot)
        assert bar_count(app) == "match 3 of 40"
        # Wrapping: back from the first match goes to the last.
        screen._mark(0)
        await pilot.press("N")
        await settle(pilot)
        assert screen.match_at == 39
        assert bar_count(app) == "match 40 of 40"
        # Escape drops the search and its highlights.
        await pilot.press("escape")
        await settle(pilot)
        assert screen.pattern is None
        assert not any("yellow" in style for style in _styles(log, 0))


async def test_logs_search_bar_shift_enter_goes_backwards(scene_backend: SceneBackend):
    app = ConsoleApp(scene_backend, mode="logs")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LogsScreen)
        screen.show_server(A)
        await settle(pilot)
        await pilot.press("slash", *"decode")
        await settle(pilot)
        field = screen.query_one(FilterInput)
        assert screen.focused is field
        await pilot.press("shift+enter")
        await settle(pilot)
        assert screen.match_at == 39  # the last Decode line: searching backwards from the top
        assert bar_count(app) == "match 40 of 40"


async def test_keys_typed_at_once_after_slash_land_in_the_filter(scene_backend: SceneBackend):
    """A paste or tmux send-keys delivers `/tp4` in one read: every key after `/` is the
    filter's, none a key binding (`t` would switch to Topology)."""
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for key, character in (("slash", "/"), ("t", "t"), ("p", "p"), ("4", "4")):
            app.post_message(events.Key(key, character))
        await settle(pilot)
        assert app.screen.TITLE == "Servers"
        assert app.screen.query_one(FilterBar).text == "tp4"
        assert row_keys(app.screen.query_one("#list", DataTable)) == [B]
        # In the field, `/` is a character (the Logs search looks for paths too).
        await pilot.press("slash")
        await settle(pilot)
        assert app.screen.query_one(FilterBar).text == "tp4/"
