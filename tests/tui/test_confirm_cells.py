"""Chosen cells: ticks read [x]/[ ] (not colour alone), nothing is preselected, and Ctrl+S
asks first with what will run ("N cells × M levels × K requests, about T") before anything
starts."""

from __future__ import annotations

import pytest

from console.cli.services import Services
from console.tui.app import ConsoleApp
from console.tui.screens.cells import CellsScreen, TickList
from console.tui.screens.modals import ConfirmScreen
from tests.tui.conftest import settle, until


def lines(ticks: TickList) -> list[str]:
    return [ticks.render_line(y).text for y in range(ticks.size.height)]


async def test_cells_show_text_ticks_and_confirm_with_an_estimate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "1")
    backend = Services.create(demo=True).live_backend(recordings=None)
    app = ConsoleApp(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("b")
        await settle(pilot)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, CellsScreen), 10, "the cells dialog")
        ticks = app.screen.query_one("#cells", TickList)
        await settle(pilot)
        shown = [line for line in lines(ticks) if line.strip()]
        assert shown
        assert all(line.startswith("[ ] ") for line in shown), shown
        assert ticks.selected == []
        first = ticks.get_option_at_index(0).value
        await pilot.press("space")
        await settle(pilot)
        assert ticks.selected == [first]
        assert lines(ticks)[0].startswith("[x] ")
        assert lines(ticks)[1].startswith("[ ] ")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 15, "the confirmation")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert confirm.title_text == "Run 1 chosen cell(s)?"
        # The dialog's defaults: concurrency 1,4 and 16 requests a level, on the simulator.
        assert confirm.detail.startswith("2 levels × 16 requests, about ")
        assert "min" in confirm.detail.split(";")[0]
        assert "servers on GPUs" in confirm.detail
        assert first.replace("|", "/") in confirm.detail
        await pilot.press("n")
        await settle(pilot)
        assert backend.runs() == []
