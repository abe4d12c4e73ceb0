"""Bench: `g` pressed twice before its confirmation appears asks once (one dialog, so one
run on yes), and the screen's own state is written on the event loop, never by the worker
threads that start and stop runs. A live demo backend with one ready server stood in by a
view (nothing is launched: the dialog is answered no, the start and stop are stubs)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from textual.widgets import OptionList

from console.bench.request import BenchRequest
from console.cli.services import Services
from console.tui.app import ConsoleApp
from console.tui.backend import Progress
from console.tui.screens.bench import BenchScreen
from console.tui.screens.modals import ConfirmScreen
from console.tui.views import ServerView
from tests.tui.conftest import settle, until

READY = ServerView(
    id="qwen3.6-27b-tp1-1",
    profile="qwen3.6-27b",
    layout="tp1",
    variant="off",
    state="ready",
    port=40123,
    gpus=(0,),
    demo=True,
)
RUN_ID = "20261201-000000-qwen3.6-27b-tp1-off"


def dialogs(app: ConsoleApp) -> int:
    return sum(isinstance(screen, ConfirmScreen) for screen in app.screen_stack)


@pytest.fixture
def slow_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Working out the estimate takes a while (it reads runs on a real host): long enough
    for a second key press to land before the dialog."""
    speed = BenchScreen._speed

    def slow(self: BenchScreen, cell: tuple[str, str, str]) -> Any:
        time.sleep(0.5)
        return speed(self, cell)

    monkeypatch.setattr(BenchScreen, "_speed", slow)


async def test_g_twice_before_the_dialog_asks_once(
    slow_estimate: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = Services.create(demo=True).live_backend(recordings=None)
    monkeypatch.setattr(backend, "servers", lambda: [READY])
    started: list[BenchRequest] = []

    def start_bench(request: BenchRequest) -> str:
        started.append(request)
        return RUN_ID

    monkeypatch.setattr(backend, "start_bench", start_bench)
    app = ConsoleApp(backend, mode="bench")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        assert app.screen.query_one("#targets", OptionList).highlighted == 0
        await pilot.press("g", "g")
        await until(pilot, lambda: dialogs(app) > 0, 10, "the confirmation")
        await settle(pilot)
        assert dialogs(app) == 1
        await pilot.press("n")
        await settle(pilot)
        assert dialogs(app) == 0
        # Answered: `g` asks again, and yes starts one run.
        await pilot.press("g")
        await until(pilot, lambda: dialogs(app) > 0, 10, "the second confirmation")
        await pilot.press("y")
        await until(pilot, lambda: bool(started), 10, "the start")
        await settle(pilot)
        assert dialogs(app) == 0
        assert len(started) == 1


async def test_workers_leave_the_screen_state_to_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`_follow` and `_listed_at` are written on the app's thread only, after a start and a
    stop run on worker threads."""
    backend = Services.create(demo=True).live_backend(recordings=None)
    monkeypatch.setattr(backend, "start_bench", lambda request: RUN_ID)

    def stop_run(run_id: str, progress: Progress) -> str:
        return f"stopped {run_id}"

    monkeypatch.setattr(backend, "stop_run", stop_run)
    writers: list[tuple[str, str]] = []
    setattr_ = BenchScreen.__setattr__

    def watched(self: BenchScreen, name: str, value: object) -> None:
        if name in ("_follow", "_listed_at"):
            writers.append((name, threading.current_thread().name))
        setattr_(self, name, value)

    monkeypatch.setattr(BenchScreen, "__setattr__", watched)
    app = ConsoleApp(backend, mode="bench")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, BenchScreen)
        main = threading.current_thread().name
        writers.clear()
        screen._start(lambda: RUN_ID, "benchmark")
        await until(pilot, lambda: ("_follow", main) in writers, 10, "the follow")
        screen._stop_run(RUN_ID)
        await until(pilot, lambda: any(f"stopped {RUN_ID}" in n for n in app.notices), 10, "stop")
        await settle(pilot)
        assert writers
        assert {thread for _, thread in writers} == {main}, writers
