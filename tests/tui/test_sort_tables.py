"""`o` cycles the sort column, `O` reverses it, the header marks it with ▲/▼: Servers, Runs
and the dashboard's GPUs (sorted within their NUMA node). The finder's ordering rules too."""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.widgets import DataTable

from console.tui.app import ConsoleApp
from console.tui.screens.modals import HelpScreen
from console.tui.widgets.finder import Finder, FindRow, sort_value
from tests.tui.conftest import settle
from tests.tui.scene import A, B, C, SceneBackend
from tests.tui.test_filter_tables import row_keys


def headers(table: DataTable[object]) -> list[str]:
    return [str(column.label) for column in table.ordered_columns]


async def test_servers_sort_cycles_columns_and_reverses(scene_backend: SceneBackend):
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#list", DataTable)
        assert row_keys(table) == [A, B, C]  # as the backend lists them
        await pilot.press("o")
        await settle(pilot)
        assert headers(table)[0] == "ID▲"
        assert row_keys(table) == [C, A, B]  # kimi… before qwen…
        await pilot.press("O")
        await settle(pilot)
        assert headers(table)[0] == "ID▼"
        assert row_keys(table) == [B, A, C]
        await pilot.press("o", "o")  # ID -> STATE -> UP
        await settle(pilot)
        assert "UP▲" in headers(table)
        assert "ID" in headers(table)
        # Uptimes 31 s, 15 min, 1 h: ordered by time, not by their text.
        assert row_keys(table) == [C, A, B]
        await pilot.press("O")
        await settle(pilot)
        assert row_keys(table) == [B, A, C]
        # The selection follows its server through a re-sort.
        table.move_cursor(row=2)
        await pilot.press("O")
        await settle(pilot)
        assert app.screen.selected().id == C  # type: ignore[attr-defined]


async def test_servers_sort_offers_only_the_columns_shown(scene_backend: SceneBackend):
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        seen = []
        for _ in range(8):
            await pilot.press("o")
            await settle(pilot)
            seen.append(app.screen.finder.column)  # type: ignore[attr-defined]
        assert "PROFILE" not in seen  # not a column under 110 cells
        assert seen[:3] == ["ID", "STATE", "UP"]
        assert None in seen  # after the last column: back to the backend's order


async def test_runs_sort_by_id_both_ways(scene_backend: SceneBackend):
    app = ConsoleApp(scene_backend, mode="runs")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#runs", DataTable)
        older, newer = "20261129-185811-qwen-ddtree-budgets", "20261129-185848-qwen-b15-recheck"
        assert row_keys(table) == [newer, older]
        await pilot.press("o")
        await settle(pilot)
        assert headers(table)[0] == "RUN▲"
        assert row_keys(table) == [older, newer]
        await pilot.press("O")
        await settle(pilot)
        assert headers(table)[0] == "RUN▼"
        assert row_keys(table) == [newer, older]
        await pilot.press("o", "o", "o")  # RUN -> KIND -> STATUS -> CELLS
        await settle(pilot)
        assert headers(table)[3] == "CELLS▲"
        assert row_keys(table) == [newer, older]  # 2 cells done before 4


async def test_gpu_sort_by_util_within_numa_nodes(scene_backend: SceneBackend):
    app = ConsoleApp(scene_backend)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        await pilot.press("o", "o", "O")  # GPU -> UTIL, then descending
        await settle(pilot)
        text = app.screen.query_one("#gpus").text.plain  # type: ignore[attr-defined]
        lines = text.splitlines()
        assert "UTIL▼" in lines[0]
        order = [line.split()[0] for line in lines if line.strip()[:1].isdigit()]
        assert order[0] == "0"  # the busy GPU heads NUMA 0
        assert sorted(order[:4]) == ["0", "1", "2", "3"]  # nodes keep their GPUs
        assert sorted(order[4:]) == ["4", "5", "6", "7"]
        utils = [float(line.split()[1].rstrip("%")) for line in lines if line.strip()[:1].isdigit()]
        assert utils[:4] == sorted(utils[:4], reverse=True)
        assert utils[4:] == sorted(utils[4:], reverse=True)


def test_sort_value_orders_numbers_by_value_and_blanks_last():
    assert sort_value("9") < sort_value("10")
    assert sort_value("9.5%") < sort_value("10%")
    assert sort_value(Text("96W")) > sort_value("24W")
    assert sort_value("abc") > sort_value("123")
    assert sort_value("-") > sort_value("zzz")
    assert sort_value(None) == sort_value("")
    assert sort_value("Qwen") == sort_value("qwen")


def test_finder_filters_case_insensitively_and_sorts_stably():
    rows = [
        FindRow("a", {"NAME": "Alpha", "N": "3"}),
        FindRow("b", {"NAME": "beta", "N": "-"}),
        FindRow("c", {"NAME": Text("Gamma"), "N": "3"}),
        FindRow("d", {"NAME": "delta", "N": "1"}, {"N": sort_value(10)}),
    ]
    finder = Finder()
    assert [r.key for r in finder.apply(rows)] == ["a", "b", "c", "d"]
    finder.text = "A"
    assert [r.key for r in finder.apply(rows)] == ["a", "b", "c", "d"]
    finder.text = "mm"
    assert [r.key for r in finder.apply(rows)] == ["c"]
    finder.text = ""
    assert finder.cycle(["NAME", "N"]) == "NAME"
    assert finder.cycle(["NAME", "N"]) == "N"
    # Ties keep their order; an explicit sort value wins over the text; blanks go last.
    assert [r.key for r in finder.apply(rows)] == ["a", "c", "d", "b"]
    finder.reverse(["NAME", "N"])
    assert [r.key for r in finder.apply(rows)] == ["d", "a", "c", "b"]
    assert finder.header("N") == "N▼"
    assert finder.header("NAME") == "NAME"
    assert finder.cycle(["NAME", "N"]) is None
    assert finder.header("N") == "N"


@pytest.mark.parametrize("mode", ["servers", "runs", "dashboard"])
async def test_help_lists_the_find_keys(scene_backend: SceneBackend, mode: str):
    app = ConsoleApp(scene_backend, mode=mode)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        rows = dict(app.screen.rows)
        assert rows["/"] == "Filter"
        assert rows["o"] == "Sort"
        assert rows["O"] == "Reverse sort"
        if mode == "servers":
            assert rows["a"] == "Stopped"
