"""What the TUI shows and does, behind one interface: live services, a replay, or a scene.

Screens only read (`store`, `servers()`, `runs()`, `now()`) and request actions; actions
block and are run by the screens on worker threads, never on the UI loop. Every member is
one a screen renders or calls.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from console.bench.listing import RunRow
from console.bench.request import BenchRequest, CampaignRequest
from console.bench.results import RunSummary
from console.profiles.loader import ProfileCatalog
from console.telemetry.store import TimeSeriesStore
from console.topology.model import Topology
from console.topology.placement import Plan
from console.tui.views import FeedNote, ServerView

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet

Progress = Callable[[str], None]


class ReplayControls(Protocol):
    """Play/pause/seek of a replay (absent for live backends)."""

    playing: bool
    position_s: float
    speed: float
    message: str | None
    """Why the replay stops short (a damaged file), shown on every screen."""

    @property
    def duration_s(self) -> float:
        """How far the recording goes (it grows while the file is being indexed)."""

    @property
    def indexed_fraction(self) -> float | None:
        """How much of the file is indexed while that goes on in the background; None once
        it is all indexed."""

    def toggle(self) -> None: ...

    def seek(self, position_s: float) -> None: ...

    def step(self, frames: int) -> None: ...

    def keep_history(self, history_s: float) -> None:
        """A chart window of `history_s` is shown: keep that much history."""


class Backend(Protocol):
    demo: bool
    read_only: bool
    """True for replays and scenes: actions are refused with a message."""
    store: TimeSeriesStore
    topology: Topology
    catalog: ProfileCatalog
    runs_root: Path
    campaigns: list[Path]
    replay: ReplayControls | None

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def now(self) -> float:
        """The monotonic instant the screens show (the end of every chart's window)."""

    def version(self) -> int:
        """Moves whenever anything shown may have changed (store or servers)."""

    def servers(self) -> list[ServerView]: ...

    async def open_fleet(self) -> Fleet:
        """The fleet of hosts.toml, started on first call (its streams run as tasks on the
        loop); ActionRefused naming the reason where there is none (a replay, a damaged
        hosts file)."""

    def fleet_now(self) -> Fleet | None:
        """The fleet when it runs (started with the console when hosts.toml names another
        host than this one, or by the Fleet screen), None otherwise; never starts one."""

    def feed_note(self) -> FeedNote | None:
        """Where readings come from when it is not this host (`prometheus URL: 3 targets,
        1 down (...)`), for the sources strip; None for this host."""

    def runs(self) -> list[RunRow]:
        """Every benchmark run, oldest first: the results folder now (live), or the runs as
        recorded at the replay's position."""

    def run_summary(self, run_id: str) -> RunSummary | None:
        """One run's summary (live: through its cache of record, `summary.json`; replay: as
        recorded); None when there is none to show. Raises a ConsoleError (UnreadableRun)
        naming the file and the reason when the run's files cannot be read."""

    def plan(
        self, profile: str, layout: str, variant: str, replacing: str | None = None
    ) -> Plan: ...

    def flag_check(self, plan: Plan) -> str: ...

    def launch(self, plan: Plan, progress: Progress) -> ServerView: ...

    def stop_server(self, server_id: str, progress: Progress) -> str: ...

    def restart(self, server_id: str, progress: Progress) -> ServerView: ...

    def switch(self, server_id: str, plan: Plan, progress: Progress) -> ServerView: ...

    def start_bench(self, request: BenchRequest) -> str:
        """Create the run from `request` and start it detached; returns its run id."""

    def start_campaign(self, request: CampaignRequest) -> str:
        """Create the run from `request` and start it detached; returns its run id."""

    def demo_campaign(self) -> CampaignRequest:
        """The ready-made demo sweep, placed on a free GPU and port beside running servers."""

    def stop_run(self, run_id: str, progress: Progress) -> str:
        """Stop a running benchmark or campaign as Ctrl-C does (in-flight requests
        recorded, partial summary, resumable, its servers stopped) and wait for it; says
        what is left. ActionRefused when it is not running or cannot be stopped."""


class ActionRefused(Exception):
    """The backend cannot do this (a replay, or a bad request); the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
