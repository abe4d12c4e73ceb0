"""`/` and `o` on the Bench screen's runs list (the same finder as Runs and Servers)."""

from __future__ import annotations

from textual.widgets import DataTable

from console.tui.app import ConsoleApp
from tests.tui.conftest import settle
from tests.tui.scene import SceneBackend
from tests.tui.test_filter_tables import row_keys

NEWER, OLDER = "20261129-185848-qwen-b15-recheck", "20261129-185811-qwen-ddtree-budgets"


async def test_bench_runs_filter_and_sort(scene_backend: SceneBackend) -> None:
    app = ConsoleApp(scene_backend, mode="bench")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#recent", DataTable)
        assert row_keys(table) == [NEWER, OLDER]
        app.screen.set_focus(table)
        await pilot.press("slash", *"budgets", "enter")
        await settle(pilot)
        assert row_keys(table) == [OLDER]
        assert app.screen._selected_run() == OLDER  # type: ignore[attr-defined]
        await pilot.press("escape")
        await settle(pilot)
        assert row_keys(table) == [NEWER, OLDER]
        await pilot.press("o")
        await settle(pilot)
        assert row_keys(table) == [OLDER, NEWER]
