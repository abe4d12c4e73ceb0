"""The command palette offers the current screen's actions and the global ones; each runs
the same action, with the same dialog and confirmation, as its key. Demo mode, real
simulator processes on free ports."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from textual.command import CommandPalette
from textual.widgets import Input

from console.cli.services import Services
from console.tui.app import ConsoleApp
from console.tui.screens.cells import CellsScreen
from console.tui.screens.launch import LaunchScreen
from tests.conftest import run_cli_subprocess
from tests.tui.conftest import settle, until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("free_port_profiles")]


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=os.environ.copy())


async def run_from_palette(pilot, app: ConsoleApp, text: str) -> None:
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette), 10, "the palette")
    app.screen.query_one(Input).value = text
    await pilot.pause(0.3)
    await pilot.press("enter")


async def test_palette_actions_launch_snapshot_and_pick_cells() -> None:
    backend = Services.create(demo=True).live_backend(recordings=None)
    app = ConsoleApp(backend)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        # A global action from the dashboard: the Servers screen's launch dialog.
        await run_from_palette(pilot, app, "Launch a server")
        await until(pilot, lambda: isinstance(app.screen, LaunchScreen), 10, "the launch dialog")
        assert app.current_mode == "servers"
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        await until(pilot, lambda: screen.plan is not None, 15, "the plan")
        await pilot.press("enter")
        await until(
            pilot,
            lambda: any(s.state == "ready" for s in backend.servers()),
            60,
            "the launched server to be ready",
        )

        # A global action that writes a file: this screen as SVG under the state folder.
        await run_from_palette(pilot, app, "Snapshot this screen")
        folder = backend.runs_root.parent / "snapshots"
        await until(pilot, lambda: folder.is_dir() and any(folder.glob("*.svg")), 10, "the SVG")
        assert "<svg" in next(folder.glob("*.svg")).read_text()[:2000]

        # The current screen's own action, by its key's description.
        await pilot.press("b")
        await settle(pilot)
        await run_from_palette(pilot, app, "Pick cells (p)")
        await until(pilot, lambda: isinstance(app.screen, CellsScreen), 10, "the cells dialog")
        await pilot.press("escape")
        await settle(pilot)
        assert backend.runs() == []
        await pilot.press("q")
