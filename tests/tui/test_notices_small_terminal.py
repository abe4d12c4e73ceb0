"""At 80x24 notices sit on their own lines above the key bar, never over the table they
refer to, and every list on the Bench screen keeps at least three rows in view."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, OptionList

from console.tui.app import ConsoleApp
from console.tui.widgets.keybar import KeyBar
from console.tui.widgets.notice_line import NoticeLine
from tests.tui.conftest import settle
from tests.tui.scene import SceneBackend


@pytest.mark.parametrize(
    ("mode", "key", "table"), [("bench", "g", "#recent"), ("servers", "x", "#list")]
)
async def test_a_notice_hides_no_row_of_the_table(
    scene_backend: SceneBackend, mode: str, key: str, table: str
) -> None:
    app = ConsoleApp(scene_backend, mode=mode)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        rows = app.screen.query_one(table, DataTable)
        rows.focus()
        await pilot.press(key)  # a replay refuses it: a notice
        await settle(pilot)
        line = app.screen.query_one(NoticeLine)
        assert line.display
        assert line.messages
        assert "read-only" in line.messages[-1]
        notice = line.region
        assert notice.height >= 1
        for widget in app.screen.query(DataTable):
            assert not notice.overlaps(widget.region), f"{widget.id} under the notice"
        assert not notice.overlaps(app.screen.query_one(KeyBar).region)
        # The table is laid out above the notice, not clipped behind it.
        assert rows.region.bottom <= notice.y


async def test_every_bench_list_shows_three_rows_at_80x24(scene_backend: SceneBackend) -> None:
    app = ConsoleApp(scene_backend, mode="bench")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for selector in ("#targets", "#campaigns"):
            options = app.screen.query_one(selector, OptionList)
            assert options.scrollable_content_region.height >= 3, selector
        campaigns = app.screen.query_one("#campaigns", OptionList)
        assert campaigns.option_count >= 2
        # Both shipped campaign files are in view, not one.
        assert campaigns.scrollable_content_region.height >= campaigns.option_count
        recent = app.screen.query_one("#recent", DataTable)
        assert recent.scrollable_content_region.height - 1 >= 3  # rows below the header
