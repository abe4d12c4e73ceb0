"""Cancel from the console: `x` on a running benchmark's or campaign's Bench row, confirmed
with what it stops, stops it as Ctrl-C does (the level recorded as interrupted, the servers
a campaign launched stopped). Real simulator processes and detached runners; free ports."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import DataTable

from console.cli.services import Services
from console.tui import live
from console.tui.app import ConsoleApp
from console.tui.live import LiveBackend
from console.tui.screens.bench import BenchScreen
from console.tui.screens.modals import ConfirmScreen
from tests.conftest import run_cli_subprocess
from tests.tui.conftest import settle, until
from tests.tui.test_screens import static_text

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("free_port_profiles")]


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Simulators slow enough that a run is still going when the test stops it."""
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "2")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=os.environ.copy())


def status(run_dir: Path) -> str:
    return str(json.loads((run_dir / "run.json").read_text())["status"])


def only_run(backend: LiveBackend) -> Path:
    runs = backend.runs()
    assert len(runs) == 1
    return runs[0].path


def confirm_text(app: ConsoleApp) -> str:
    screen = app.screen
    assert isinstance(screen, ConfirmScreen)
    return f"{screen.title_text}\n{screen.detail}"


async def stop_the_selected_run(pilot, app: ConsoleApp) -> str:
    """x on the runs list's first row (the newest run), then yes; the confirmation's text."""
    table = app.screen.query_one("#recent", DataTable)
    table.focus()
    table.move_cursor(row=0)
    await pilot.press("x")
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10, "the confirmation")
    asked = confirm_text(app)
    await pilot.press("y")
    return asked


async def test_x_stops_a_running_benchmark_from_its_row() -> None:
    backend = Services.create(demo=True).live_backend(recordings=None)
    app = ConsoleApp(backend)
    async with app.run_test(size=(160, 50)) as pilot:
        plan = backend.plan("qwen3.6-27b", "tp1", "off")
        server = backend.launch(plan, lambda line: None)
        assert server.state == "ready"
        await pilot.press("b")
        screen = app.screen
        assert isinstance(screen, BenchScreen)
        await until(pilot, lambda: server.id in screen._targets, 30, "the server in the list")
        await settle(pilot)
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 15, "the confirmation")
        # The demo defaults at twice the simulator's speed: about half a minute.
        assert "2 levels × 8 requests, under a minute (256 in, 112 out)" in confirm_text(app)
        await pilot.press("y")
        await until(pilot, lambda: len(backend.runs()) == 1, 30, "the benchmark's run")
        run_dir = only_run(backend)
        # The running level's numbers show on the row and in the detail before it is stopped.
        await until(
            pilot, lambda: backend.runs()[0].level is not None, 60, "the level's live progress"
        )
        await settle(pilot)
        await until(
            pilot,
            lambda: "err" in static_text(app, "#levels-text"),
            15,
            "the detail's live numbers",
        )
        detail = static_text(app, "#levels-text")
        assert "now: qwen3.6-27b/tp1/off level 1/2 (concurrency 1)" in detail
        # Quitting now would say the run goes on, and how to stop it.
        leaving = app.leaving_message() or ""
        assert f"run keeps running ({run_dir.name})" in leaving
        assert f"`ddconsole runs stop {run_dir.name} --demo` stops it" in leaving
        asked = await stop_the_selected_run(pilot, app)
        assert "Stop benchmark" in asked
        assert "now: qwen3.6-27b/tp1/off level 1/2" in asked
        assert "the server it measures keeps running" in asked
        assert run_dir.name in asked
        await until(pilot, lambda: status(run_dir) == "interrupted", 60, "the run to stop")
        await until(
            pilot, lambda: any("stopped run" in n for n in app.notices), 30, "the stop's report"
        )
        # A benchmark leaves the server it measured alone.
        assert {s.id: s.state for s in backend.servers()}[server.id] == "ready"
        await pilot.press("q")


async def test_x_stops_a_running_campaign_and_the_server_it_launched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Long enough levels that the first cell is still running when `x` is pressed.
    monkeypatch.setattr(live, "DEMO_SWEEP_REQUESTS", 16)
    backend = Services.create(demo=True).live_backend(recordings=None)
    app = ConsoleApp(backend)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("b")
        await settle(pilot)
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 15, "the confirmation")
        assert "5 cells × 1 level × 16 requests" in confirm_text(app)  # as patched above
        await pilot.press("y")
        await until(pilot, lambda: len(backend.runs()) == 1, 30, "the campaign's run")
        run_dir = only_run(backend)

        def serving() -> bool:
            progress = backend.runs()[0].progress
            return progress is not None and progress.level is not None

        await until(pilot, serving, 60, "the campaign's first level")
        launched = [s.id for s in backend.servers() if s.live]
        assert launched
        await settle(pilot)
        asked = await stop_the_selected_run(pilot, app)
        assert asked.startswith("Stop campaign qwen-ddtree-budgets?")
        assert "0/5 cells done" in asked
        assert "the servers it launched are stopped and it can be resumed" in asked
        await until(pilot, lambda: status(run_dir) == "interrupted", 90, "the campaign to stop")
        await until(
            pilot,
            lambda: not any(s.live for s in backend.servers() if s.id in launched),
            30,
            "the campaign's server to stop",
        )
        await until(
            pilot, lambda: any("stopped campaign" in n for n in app.notices), 30, "the report"
        )
        assert any("--resume" in n for n in app.notices)
        await pilot.press("q")
