"""A worker thread that finishes after its screen left (popped, or the app shutting down)
hands nothing to the gone widgets: the app ends cleanly instead of failing on a missing
widget (the Bench screen's run list once did, at quit, on a busy CI box)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from console.bench.listing import RunRow
from console.tui import from_thread
from console.tui.app import ConsoleApp
from console.tui.screens import bench
from tests.tui.conftest import settle, until
from tests.tui.test_bench_summary_cache import DiskBackend


class GatedRunsBackend(DiskBackend):
    """A frozen host whose run list, once armed, waits for `release` before it answers."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.armed = False
        self.waiting = threading.Event()
        self.release = threading.Event()

    def runs(self) -> list[RunRow]:
        if self.armed:
            self.waiting.set()
            self.release.wait(30)
        return super().runs()


async def test_a_run_list_that_arrives_during_shutdown_does_not_fail_the_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed: list[bool] = []
    handed_over = threading.Event()
    real_call_live = from_thread.call_live

    def noted_call_live(
        node: DOMNode, callback: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> None:
        try:
            real_call_live(node, callback, *args, **kwargs)
        finally:
            handed.append(True)
            handed_over.set()

    monkeypatch.setattr(bench, "call_live", noted_call_live)
    backend = GatedRunsBackend(tmp_path / "runs")
    app = ConsoleApp(backend, mode="bench", refresh_s=0.05)
    real_prune = app._prune

    async def prune_children_first(*nodes: Widget, parent: DOMNode | None = None) -> None:
        # At quit Textual removes a screen's widgets before the screen itself; the list
        # the screen asked for arrives in between, when its run table is already gone.
        screens = [node for node in nodes if isinstance(node, bench.BenchScreen)]
        if screens and backend.armed and not backend.release.is_set():
            await real_prune(*screens[0].children, parent=screens[0])
            assert not screens[0].query("#recent")
            backend.release.set()
            await asyncio.to_thread(handed_over.wait, 30)
        await real_prune(*nodes, parent=parent)

    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, bench.BenchScreen)
        handed.clear()
        handed_over.clear()
        backend.armed = True
        screen._listed_at = 0.0
        screen.refresh_data()
        await until(pilot, backend.waiting.is_set, 20, "the run list to be asked for")
        monkeypatch.setattr(app, "_prune", prune_children_first)
    # Leaving run_test re-raises whatever failed the app; reaching here means nothing did.
    assert handed == [True]


class Plain(Screen[None]):
    def compose(self) -> ComposeResult:
        yield Static("here", id="here")


class TwoScreens(App[None]):
    def on_mount(self) -> None:
        self.push_screen(Plain())


def in_thread(work: Callable[[], object]) -> None:
    """Run `work` in a thread and wait for it, as a thread worker would run it."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    if failures:
        raise failures[0]


async def test_the_callback_runs_while_the_screen_is_shown_and_not_once_it_is_popped() -> None:
    app = TwoScreens()
    calls: list[str] = []
    async with app.run_test() as pilot:
        await pilot.pause()
        shown = app.screen
        assert isinstance(shown, Plain)
        await asyncio.to_thread(
            in_thread, lambda: from_thread.call_live(shown, lambda: calls.append("shown"))
        )
        assert calls == ["shown"]
        await app.pop_screen()
        await pilot.pause()
        assert not from_thread.is_live(shown)
        await asyncio.to_thread(
            in_thread,
            lambda: from_thread.call_live(shown, lambda: shown.query_one("#here", Static)),
        )
    assert calls == ["shown"]


async def test_an_error_in_the_callback_still_reaches_the_worker() -> None:
    app = TwoScreens()
    async with app.run_test() as pilot:
        await pilot.pause()
        shown = app.screen

        def broken() -> None:
            raise RuntimeError("the callback's own fault")

        with pytest.raises(RuntimeError, match="the callback's own fault"):
            await asyncio.to_thread(in_thread, lambda: from_thread.call_live(shown, broken))
