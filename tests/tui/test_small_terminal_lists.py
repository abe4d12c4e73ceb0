"""At 80x24 every list on Servers and Runs shows its rows (no panel on top of them), and run
names cut to fit stay told apart."""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.coordinate import Coordinate
from textual.widgets import DataTable

from console.tui.app import ConsoleApp
from console.tui.screens.logs import LogsScreen
from console.tui.widgets.log_view import LogView
from console.tui.widgets.run_tables import distinct_names, middle_cut
from tests.tui.conftest import settle
from tests.tui.scene import FIXTURES, C, SceneBackend
from tests.tui.test_screens import static_text

FIXTURE_RUN = FIXTURES / "runs" / "20261129-185811-qwen-ddtree-budgets"
LONG_NAME = "bench-kimi-k2.6-tp8-eagle3-concurrency-sweep-input-2048"


def many_runs(root: Path, count: int) -> list[str]:
    """`count` copies of a fixture run, all with one long name, a minute apart."""
    ids = [f"20261201-02{minute:02d}36-{LONG_NAME}" for minute in range(count)]
    for run_id in ids:
        shutil.copytree(FIXTURE_RUN, root / run_id)
    return ids


def cells(table: DataTable[object], column: int) -> list[str]:
    return [str(table.get_cell_at(Coordinate(row, column))) for row in range(table.row_count)]


async def test_runs_at_80x24_show_several_rows_with_distinct_names(
    scene_backend: SceneBackend, tmp_path: Path
):
    ids = many_runs(tmp_path, 9)
    scene_backend.runs_root = tmp_path
    app = ConsoleApp(scene_backend, mode="runs")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#runs", DataTable)
        assert table.row_count == 9
        names = cells(table, 0)
        assert len(set(names)) == 9, names
        assert all("…" in name for name in names)  # cut: the id is longer than the room
        # Each keeps its start time and the name's end.
        assert any(name.startswith("20261201-020036") for name in names)
        assert all(name.endswith("input-2048") for name in names)
        # The whole row fits: STATUS and CELLS are not pushed off the edge.
        assert sum(column.get_render_width(table) for column in table.ordered_columns) <= 80
        # The list shows several rows, and the detail pane starts below it.
        detail = app.screen.query_one("#detail")
        assert table.region.height >= 5
        assert table.region.bottom <= detail.region.y
        assert set(ids) == {str(key.value) for key in table.rows}


async def test_bench_runs_at_80x24_tell_runs_of_one_name_apart(
    scene_backend: SceneBackend, tmp_path: Path
):
    """Every copy carries the fixture's name (`qwen-ddtree-budgets`): cut to the narrow
    list, each still reads differently, by the start time from its id."""
    many_runs(tmp_path, 9)
    scene_backend.runs_root = tmp_path
    app = ConsoleApp(scene_backend, mode="bench")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#recent", DataTable)
        assert table.row_count == 8  # the newest eight
        names = cells(table, 0)
        assert len(set(names)) == 8, names
        assert names[0].startswith("02:08:36 ")
        assert all(name.endswith("-budgets") for name in names)


async def test_servers_at_80x24_list_above_the_detail(scene_backend: SceneBackend):
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#list", DataTable)
        lower = app.screen.query_one("#lower")
        assert table.row_count == 3
        assert table.region.height >= 4  # header and three rows
        assert table.region.bottom <= lower.region.y
        # With the filter bar open the rows stay in view too.
        await pilot.press("slash")
        await settle(pilot)
        bar = app.screen.query_one("FilterBar")
        assert table.region.bottom <= bar.region.y
        assert bar.region.bottom <= lower.region.y


def test_middle_cut_keeps_both_ends():
    assert middle_cut("abcdef", 10) == "abcdef"
    assert middle_cut("0123456789", 7) == "01…6789"
    assert len(middle_cut(LONG_NAME, 20)) == 20
    assert middle_cut(LONG_NAME, 20).endswith("input-2048")


def test_distinct_names_tell_alike_runs_apart():
    same = [
        ("20261201-020836-bench-kimi-k2.6-tp8-eagle3", "bench-kimi-k2.6-tp8-eagle3"),
        ("20261201-021036-bench-kimi-k2.6-tp8-eagle3", "bench-kimi-k2.6-tp8-eagle3"),
        ("20261201-021136-bench-http:--127.0.0.1:30000", "bench-http:--127.0.0.1:30000"),
        ("20261201-021236-bench-http:--127.0.0.1:30001", "bench-http:--127.0.0.1:30001"),
    ]
    labels = distinct_names(same, 20)
    assert len(set(labels)) == 4, labels
    assert all(len(label) <= 20 for label in labels)
    assert labels[0].startswith("02:08:36 ")  # same name: its start time in front
    assert labels[2].endswith("30000")
    assert labels[3].endswith("30001")
    # Short enough: shown whole.
    assert distinct_names([("20261201-000000-a", "a")], 20) == ["a"]
    # The same second and the same name: the ids' tails.
    twins = [
        ("20261201-000000-x-1" + "y" * 30, "n" * 30),
        ("20261201-000000-x-2" + "y" * 30, "n" * 30),
    ]
    assert len(set(distinct_names(twins, 12))) == 2


async def test_runs_detail_refits_when_the_terminal_narrows(scene_backend: SceneBackend):
    """Laid out for 160 columns, the detail is laid out again at 80: whole columns
    dropped, no value cut with an ellipsis."""
    app = ConsoleApp(scene_backend, mode="runs")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        wide = static_text(app, "#detail-text")
        assert "E2E P99" in wide
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        narrow = static_text(app, "#detail-text")
        table_lines = [line for line in narrow.splitlines() if "TOK/S" in line]
        assert table_lines, narrow
        assert "…" not in narrow
        # Whole columns went (the least read first), the ones an expert reads first stayed.
        assert "VERIFY/STEP" in wide
        assert "VERIFY/STEP" not in narrow
        assert "E2E P99" not in narrow
        for kept in ("TOK/S", "ACCEPT/STEP", "SPEEDUP", "TTFT P50/P99"):
            assert kept in narrow
        assert max(len(line.rstrip()) for line in narrow.splitlines()) <= 78


async def test_logs_wrap_long_lines_at_80x24_and_jumps_still_land(scene_backend: SceneBackend):
    app = ConsoleApp(scene_backend, mode="logs")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LogsScreen)
        assert screen.server_id == C
        log = screen.query_one(LogView)
        count = log.line_count
        assert log.virtual_size.height == count
        assert log.virtual_size.width > 80  # long lines run off: scrolled sideways
        await pilot.press("w")
        await settle(pilot)
        assert log.wrap
        assert log.virtual_size.height > count
        assert log.virtual_size.width <= 80
        await pilot.press("slash", *"sigquit", "enter")
        await settle(pilot)
        hit = screen.match_at
        assert "sigquit" in screen.lines[hit]
        assert log.line_y(hit) > hit  # lines above it wrapped
        assert log.scroll_offset.y == max(0, min(log.line_y(hit) - 3, log.max_scroll_y))
        await pilot.press("w")
        await settle(pilot)
        log = screen.query_one(LogView)
        assert not log.wrap
        assert log.virtual_size.height == count
