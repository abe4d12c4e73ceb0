"""At 80 columns run ids and names are cut in the middle to fit; `/` still finds a run by
any part of its full id or name, including the part the cut left out."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import DataTable

from console.tui.app import ConsoleApp
from console.tui.widgets.finder import FindRow
from tests.tui.conftest import settle
from tests.tui.scene import SceneBackend
from tests.tui.test_filter_tables import row_keys
from tests.tui.test_small_terminal_lists import cells, many_runs

HIDDEN = "bench-kimi-k2.6"
"""The middle of the long name: cut out of every label at 80 columns."""


def test_a_row_matches_its_hidden_search_text():
    row = FindRow("k", {"RUN": "2026…2048"}, search="20261201-bench-concurrency-sweep-2048")
    assert row.matches("sweep")
    assert row.matches("2026")
    assert not row.matches("kimi")


async def test_runs_filter_finds_runs_by_the_cut_part_of_their_id(
    scene_backend: SceneBackend, tmp_path: Path
):
    ids = many_runs(tmp_path, 3)
    scene_backend.runs_root = tmp_path
    app = ConsoleApp(scene_backend, mode="runs")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#runs", DataTable)
        assert not any(HIDDEN in label for label in cells(table, 0)), cells(table, 0)
        await pilot.press("slash", *HIDDEN)
        await settle(pilot)
        assert sorted(row_keys(table)) == sorted(ids)
        await pilot.press(*"-nomatch")
        await settle(pilot)
        assert table.row_count == 0


async def test_bench_filter_finds_runs_by_the_cut_part_of_their_name(
    scene_backend: SceneBackend, tmp_path: Path
):
    """The narrow Bench list shows the name alone, cut: the filter reads it whole."""
    ids = many_runs(tmp_path, 2)
    name = "campaign-kimi-k2.6-tp8-eagle3-long-context-budget-sweep-2048"
    path = tmp_path / ids[0] / "run.json"
    meta = json.loads(path.read_text())
    meta["name"] = name
    path.write_text(json.dumps(meta))
    scene_backend.runs_root = tmp_path
    app = ConsoleApp(scene_backend, mode="bench")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#recent", DataTable)
        assert table.row_count == 2
        assert not any("long-context" in label for label in cells(table, 0)), cells(table, 0)
        await pilot.press("slash", *"long-context")
        await settle(pilot)
        assert row_keys(table) == [ids[0]]
