"""The Logs screen shows the diagnosis `ddconsole diagnose` gives: the phase a failed server
reached, with its time, and the failure's line, which `d` scrolls to."""

from __future__ import annotations

import io

from rich.console import Console
from textual.widgets import Static

from console.server.diagnose import diagnose_file
from console.tui.app import ConsoleApp
from console.tui.screens.logs import LogsScreen
from tests.tui import scene
from tests.tui.conftest import settle
from tests.tui.scene import C


def _reason(app: ConsoleApp) -> str:
    widget = app.screen.query_one("#reason", Static)
    console = Console(width=160, file=io.StringIO(), color_system=None)
    with console.capture() as captured:
        console.print(widget.content)
    return captured.get()


async def test_failed_server_shows_phase_reached_and_failure_line(
    scene_backend: scene.SceneBackend,
) -> None:
    expected = diagnose_file(str(scene.ROOT / "logs" / f"{C}.log"))
    assert expected.failure is not None
    assert expected.reached is not None
    app = ConsoleApp(scene_backend, mode="logs")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LogsScreen)
        assert screen.server_id == C
        reason = _reason(app)
        assert "reached: loading weights (2026-11-29 18:00:09)" in reason
        assert f"failure at line {expected.failure_line_number} (d)" in reason
        await pilot.press("d")
        await settle(pilot)
        assert "torch.OutOfMemoryError" in list(screen.lines)[screen.match_at]
