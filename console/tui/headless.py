"""Screens rendered without a terminal: the snapshot's dashboard.svg uses the TUI's widgets.

A static backend holds one moment (a store, the servers, the host, the runs it was given)
and refuses actions; the app runs headless at a fixed size and exports its screen as SVG.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from console.bench.listing import RunRow
from console.bench.results import JsonDict, RunSummary
from console.profiles.loader import ProfileCatalog
from console.telemetry.store import TimeSeriesStore
from console.topology.model import Topology
from console.tui.backend import ReplayControls
from console.tui.replay import ReadOnlyActions
from console.tui.views import FeedNote, ServerView


class StaticBackend(ReadOnlyActions):
    """One moment, frozen: what a snapshot shows."""

    read_only = True

    def __init__(
        self,
        *,
        store: TimeSeriesStore,
        now_mono: float,
        servers: list[JsonDict],
        topology: Topology,
        runs_root: Path,
        demo: bool,
        catalog: ProfileCatalog | None = None,
        runs: list[RunRow] | None = None,
        summaries: dict[str, RunSummary] | None = None,
    ) -> None:
        self.store = store
        self._now = now_mono
        self._servers = [ServerView.from_json(s) for s in servers]
        self.topology = topology
        self.runs_root = runs_root
        self.demo = demo
        self.catalog = catalog or ProfileCatalog()
        self.campaigns: list[Path] = []
        self.replay: ReplayControls | None = None
        self._runs = list(runs or [])
        self._summaries = dict(summaries or {})

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def now(self) -> float:
        return self._now

    def version(self) -> int:
        return self.store.version

    def feed_note(self) -> FeedNote | None:
        return None

    def servers(self) -> list[ServerView]:
        return list(self._servers)

    def runs(self) -> list[RunRow]:
        return list(self._runs)

    def run_summary(self, run_id: str) -> RunSummary | None:
        return self._summaries.get(run_id)


async def render_svg_async(
    backend: Any, *, mode: str = "dashboard", size: tuple[int, int] = (160, 50), title: str = ""
) -> str:
    from console.tui.app import ConsoleApp

    app = ConsoleApp(backend, mode=mode)
    async with app.run_test(size=size) as pilot:
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
            app.refresh_now()
        await pilot.pause()
        return app.export_screenshot(title=title or f"ddconsole {mode}")


def render_svg(
    backend: Any, *, mode: str = "dashboard", size: tuple[int, int] = (160, 50), title: str = ""
) -> str:
    """The screen `mode` of `backend` as SVG (runs its own event loop)."""
    return asyncio.run(render_svg_async(backend, mode=mode, size=size, title=title))
