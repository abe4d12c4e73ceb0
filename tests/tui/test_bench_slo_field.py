"""Bench: the form's `slo` field goes into the benchmark request (validated before the
confirmation: a bad target is refused with the flag's message, and nothing starts); left
empty, the backend fills in the server's profile's [bench] slo."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from console.bench.request import BenchRequest
from console.cli.services import Services
from console.tui.app import ConsoleApp
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


def dialogs(app: ConsoleApp) -> int:
    return sum(isinstance(screen, ConfirmScreen) for screen in app.screen_stack)


async def _bench_with(slo: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list[str]]:
    backend = Services.create(demo=True).live_backend(recordings=None)
    monkeypatch.setattr(backend, "servers", lambda: [READY])
    started: list[BenchRequest] = []

    def start_bench(request: BenchRequest) -> str:
        started.append(request)
        return "run-1"

    monkeypatch.setattr(backend, "start_bench", start_bench)
    app = ConsoleApp(backend, mode="bench")
    notes: list[str] = []
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        monkeypatch.setattr(app, "notify", lambda message, **_: notes.append(str(message)))
        app.screen.query_one("#slo", Input).value = slo
        await pilot.press("g")
        if slo.startswith("ttft=2"):
            await until(pilot, lambda: dialogs(app) > 0, 10, "the confirmation")
            await pilot.press("y")
            await until(pilot, lambda: bool(started), 10, "the start")
        else:
            await settle(pilot)
            assert dialogs(app) == 0
    return started, notes


async def test_a_good_slo_reaches_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    started, _ = await _bench_with("ttft=2s,itl=60ms", monkeypatch)
    (request,) = started
    assert request.slo == "ttft=2s,itl=60ms"


async def test_a_bad_slo_is_refused_before_the_dialog(monkeypatch: pytest.MonkeyPatch) -> None:
    started, notes = await _bench_with("ttft=fast", monkeypatch)
    assert started == []
    assert any("--slo: 'ttft=fast' is not a target" in note for note in notes)
