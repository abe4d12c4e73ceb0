"""TUI tests run in UTC (the runs list shows local times) against the fixed demo scene."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from tests.tui import scene


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


@pytest.fixture
def scene_backend() -> scene.SceneBackend:
    return scene.backend()


@pytest.fixture
def scene_root() -> Path:
    return scene.ROOT


async def settle(pilot: Pilot[None]) -> None:
    """Let refreshes and worker threads (run lists, summaries, log reads) finish."""
    for _ in range(3):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
        pilot.app.refresh_now()  # type: ignore[attr-defined]
    await pilot.pause()


async def until(
    pilot: Pilot[None], check: Callable[[], bool], timeout: float = 30.0, what: str = "condition"
) -> None:
    """Pump the app until `check()` holds (real processes take real time)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await pilot.pause(0.2)


Check = Callable[[], Awaitable[None]]
