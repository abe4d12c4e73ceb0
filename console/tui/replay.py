"""Replay: a recording feeds the same store the live poller feeds, so every screen works.

Position 0 is the recording's first instant. Playing advances the position with the wall
clock (times `speed`); frames up to the position are written to the store through the
poller's own write path. Seeking back (or far ahead) rebuilds the store from a bounded number
of frames found through the recording's index: the latest server and run lists before the
position and the polls the store's history holds (stores only grow forward in time).
Actions that would change the host are refused: this is the past.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.bench.listing import RunRow
from console.bench.request import BenchRequest, CampaignRequest
from console.bench.results import RunSummary
from console.profiles.loader import ProfileCatalog
from console.telemetry.poller import write_result
from console.telemetry.recording import Recording, SeriesReader
from console.telemetry.source import PollResult
from console.telemetry.store import TimeSeriesStore
from console.topology.model import GpuInfo, NumaNode, Topology
from console.topology.placement import Plan
from console.tui.backend import ActionRefused, Progress, ReplayControls
from console.tui.views import LIVE_STATES, FeedNote, ServerView

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet

PLAY_TICK_S = 0.25
HISTORY_S = 300.0
"""History a replay's store keeps at first: the dashboard's default chart window
(screens/dashboard.py). A seek rebuilds this much, so it bounds a seek's cost; a wider chart
window asks for more (`keep_history`)."""
INLINE_POLLS = 256
"""A forward move over at most this many poll frames is applied in place (a few tens of
ms); a longer one, or any move back, rebuilds the state."""
REFUSED = "this is a replay of a recording: nothing on the host can be changed from here"


def topology_from_json(data: dict[str, Any]) -> Topology:  # the header's JSON, not run data
    gpus = tuple(
        GpuInfo(
            index=int(g["index"]),
            name=str(g.get("name", "?")),
            uuid=g.get("uuid"),
            bus_id=g.get("bus_id"),
            memory_total_bytes=g.get("memory_total_bytes"),
            numa_node=g.get("numa_node"),
            cpu_affinity=tuple(g.get("cpu_affinity") or ()),
            pcie_gen_current=g.get("pcie_gen_current"),
            pcie_gen_max=g.get("pcie_gen_max"),
            pcie_width_current=g.get("pcie_width_current"),
            pcie_width_max=g.get("pcie_width_max"),
            error=g.get("error"),
        )
        for g in data.get("gpus", [])
    )
    nodes = tuple(
        NumaNode(
            int(n["id"]),
            tuple(n.get("cpus") or ()),
            n.get("memory_total_bytes"),
            tuple(n.get("gpus") or ()),
        )
        for n in data.get("numa_nodes", [])
    )
    return Topology(
        source=str(data.get("source", "recording")),
        gpus=gpus,
        numa_nodes=nodes,
        gpu_status=data.get("gpu_status"),
        driver_version=data.get("driver_version"),
    )


def _run_rows(data: object) -> list[RunRow]:
    """A `runs` frame's rows (JSON from the recording: the parse boundary)."""
    if not isinstance(data, list):
        return []
    return [RunRow.from_json(row) for row in data if isinstance(row, dict)]


class ReadOnlyActions:
    """Every action a backend offers, refused: for replays and static snapshots."""

    async def open_fleet(self) -> Fleet:
        raise ActionRefused("the fleet view is live only: a replay or snapshot has no hosts")

    def fleet_now(self) -> Fleet | None:
        return None

    def plan(self, profile: str, layout: str, variant: str, replacing: str | None = None) -> Plan:
        raise ActionRefused(REFUSED)

    def flag_check(self, plan: Plan) -> str:
        raise ActionRefused(REFUSED)

    def launch(self, plan: Plan, progress: Progress) -> ServerView:
        raise ActionRefused(REFUSED)

    def stop_server(self, server_id: str, progress: Progress) -> str:
        raise ActionRefused(REFUSED)

    def restart(self, server_id: str, progress: Progress) -> ServerView:
        raise ActionRefused(REFUSED)

    def switch(self, server_id: str, plan: Plan, progress: Progress) -> ServerView:
        raise ActionRefused(REFUSED)

    def start_bench(self, request: BenchRequest) -> str:
        raise ActionRefused(REFUSED)

    def start_campaign(self, request: CampaignRequest) -> str:
        raise ActionRefused(REFUSED)

    def demo_campaign(self) -> CampaignRequest:
        raise ActionRefused(REFUSED)

    def stop_run(self, run_id: str, progress: Progress) -> str:
        raise ActionRefused(REFUSED)


@dataclass
class _State:
    """What a replay shows at one position: the store and the latest recorded lists, and
    how many frames (in file order) made them."""

    store: TimeSeriesStore
    servers: list[dict[str, Any]] = field(default_factory=list)  # recorded status JSON
    servers_t: float = 0.0
    runs: list[RunRow] = field(default_factory=list)
    summaries: dict[str, RunSummary] = field(default_factory=dict)
    applied: int = 0
    position_s: float = 0.0

    def apply(self, recording: Recording, index: int) -> None:
        frame = recording.frames[index]
        if frame.kind == "poll":
            try:
                write_result(self.store, recording.poll_result(frame))
            except (ValueError, KeyError, TypeError):
                pass  # one bad frame is skipped, not the replay
        elif frame.kind == "servers":
            self.servers = list(frame.data.get("v") or [])
            self.servers_t = frame.t
        elif frame.kind == "runs":
            self.runs = _run_rows(frame.data.get("v"))
        elif frame.kind == "run_summary":
            try:
                summary = RunSummary.from_json(frame.data.get("v"))
            except ValueError:
                return  # a summary of another schema shows as none, the replay goes on
            self.summaries[str(frame.data.get("id") or summary.run_id)] = summary

    def apply_until(self, recording: Recording, position_s: float) -> None:
        frames = recording.frames
        while self.applied < len(frames) and frames.t_at(self.applied) <= position_s + 1e-9:
            self.applied += 1
            self.apply(recording, self.applied - 1)
        self.position_s = max(self.position_s, position_s)
        self.store.commit()


def restore(recording: Recording, position_s: float, capacity: int) -> _State:
    """The state at `position_s` from a bounded number of frames: the latest frame of each
    kind whose latest wins (servers, runs), every run summary, and of each source only the
    polls a store of `capacity` holds. Touches nothing shared but the frames (safe on a
    worker thread)."""
    frames = recording.frames
    end = frames.applied_at(position_s)
    state = _State(TimeSeriesStore(capacity))
    for kind in ("servers", "runs"):
        where = frames.indices(kind)
        last = bisect.bisect_left(where, end) - 1
        if last >= 0:
            state.apply(recording, where[last])
    summaries = frames.indices("run_summary")
    for i in summaries[: bisect.bisect_left(summaries, end)]:
        state.apply(recording, i)
    reader = SeriesReader(recording)
    store = state.store
    series: dict[str, tuple[list[float], list[float | None]]] = {}
    for i in frames.last_polls(end, capacity):
        try:
            points = reader.points(frames[i])
        except (ValueError, KeyError, TypeError, IndexError):
            continue  # one bad frame is skipped, not the replay
        for key, t, value in points:
            found = series.get(key)
            if found is None:
                found = series[key] = ([], [])
            found[0].append(t)
            found[1].append(value)
    for key, (times, values) in series.items():
        store.extend(key, times, values)
    samples, statuses = reader.latest()
    write_result(store, PollResult([], statuses))
    for sample in samples:
        store.put_latest(sample)
    state.applied = end
    state.apply_until(recording, position_s)
    return state


class ReplayBackend(ReadOnlyActions):
    read_only = True

    def __init__(
        self,
        recording: Recording,
        *,
        runs_root: Path,
        catalog: ProfileCatalog | None = None,
        position_s: float | None = None,
        playing: bool = True,
        speed: float = 1.0,
        history_s: float = HISTORY_S,
    ) -> None:
        self.recording = recording
        self.demo = bool(recording.header.get("demo"))
        self.topology = topology_from_json(recording.header.get("topology") or {})
        self.catalog = catalog or ProfileCatalog()
        self.runs_root = runs_root
        self.campaigns: list[Path] = []
        interval = recording.header.get("interval_s")
        interval = interval if isinstance(interval, int | float) and interval > 0 else 1.0
        self._capacity = max(2, math.ceil(history_s / interval) + 1)
        self.replay: ReplayControls | None = self
        self.playing = playing
        self.speed = speed
        self.position_s = 0.0
        """Where the replay is asked to be; what is shown catches up when a rebuild ends."""
        self.message = self._damage_note()
        self._state = _State(TimeSeriesStore(self._capacity))
        self._rebuilding: asyncio.Future[_State] | None = None
        self._version = 0
        self._task: asyncio.Task[None] | None = None
        self._indexing = recording.indexing
        self._target_s: float | None = None
        """A start position past what is indexed yet: followed until it is reached."""
        start = self.duration_s if position_s is None else position_s
        if self._indexing and start > self.duration_s:
            self._target_s = start
        self.position_s = max(0.0, min(self.duration_s, start))
        self._settle(self.position_s, background=False)

    @property
    def duration_s(self) -> float:
        return self.recording.duration_s

    @property
    def indexed_fraction(self) -> float | None:
        return self.recording.indexed_fraction if self._indexing else None

    def _damage_note(self) -> str | None:
        damage = self.recording.damage
        if damage is None:
            return None
        return f"recording damaged: {damage}; replaying up to {self.duration_s:.0f} s"

    def _follow_index(self) -> None:
        """While the file is indexed in the background: redraw as it grows, follow a start
        position not indexed yet, and once it is all indexed, go there (or to the end, if
        the recording stops short of it) and show what stopped it short, if anything."""
        if not self._indexing:
            return
        self._version += 1  # the duration and the indexed share changed
        if self.recording.indexing:
            if self._target_s is not None:
                self._seek(min(self._target_s, self.duration_s))
            return
        self._indexing = False
        self.message = self._damage_note()
        target, self._target_s = self._target_s, None
        if target is not None:
            if target > self.duration_s + 1e-6:
                note = f"{target:.0f} s is past the recording's end ({self.duration_s:.0f} s)"
                self.message = f"{self.message}; {note}" if self.message else note
            self._seek(min(target, self.duration_s))

    @property
    def store(self) -> TimeSeriesStore:
        return self._state.store

    @store.setter
    def store(self, store: TimeSeriesStore) -> None:
        self._state.store = store

    @property
    def seeking(self) -> bool:
        """A rebuild for a seek is running on a worker thread."""
        return self._rebuilding is not None

    # -- playback ------------------------------------------------------------------------

    def _needs_rebuild(self, position_s: float) -> bool:
        state, frames = self._state, self.recording.frames
        if position_s < state.position_s - 1e-9 or state.applied == 0:
            return True
        if state.store.capacity < self._capacity:
            return True  # more history was asked for than the store holds
        if not frames.is_spooled:
            return False  # built in memory (a run's telemetry): small, applied in place
        end = frames.applied_at(position_s)
        polls = frames.indices("poll")
        ahead = bisect.bisect_left(polls, end) - bisect.bisect_left(polls, state.applied)
        return ahead > INLINE_POLLS

    def _settle(self, position_s: float, *, background: bool) -> None:
        """Bring the shown state to `position_s`: forward by a few polls in place, anything
        else rebuilt (on a worker thread when `background`, one at a time: a seek made while
        one runs is taken up when it ends)."""
        if not self._needs_rebuild(position_s):
            self._state.apply_until(self.recording, position_s)
            self._version += 1
            return
        if not background:
            self._state = restore(self.recording, position_s, self._capacity)
            self._version += 1
            return
        if self._rebuilding is not None:
            return  # taken up by _rebuilt
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, restore, self.recording, position_s, self._capacity)
        self._rebuilding = future
        future.add_done_callback(self._rebuilt)
        self._version += 1

    def _rebuilt(self, future: asyncio.Future[_State]) -> None:
        self._rebuilding = None
        if future.cancelled():
            return
        problem = future.exception()
        if problem is None:
            self._state = future.result()
        else:
            self.message = f"seek failed: {problem}"
            self.position_s = self._state.position_s  # stay where the replay is shown
        self._version += 1
        if problem is None and (
            abs(self._state.position_s - self.position_s) > 1e-9
            or self._state.store.capacity < self._capacity
        ):
            self._settle(self.position_s, background=True)

    def seek(self, position_s: float) -> None:
        """Move to `position_s`. In the app (a running event loop) a rebuild runs on a
        worker thread and the screens catch up when it ends; elsewhere (snapshots, scripts)
        it is done before this returns. A start position still being indexed is dropped:
        the user went elsewhere."""
        self._target_s = None
        self._seek(position_s)

    def _seek(self, position_s: float) -> None:
        position_s = max(0.0, min(self.duration_s, position_s))
        self.position_s = position_s
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._settle(position_s, background=False)
            return
        if self._rebuilding is None:
            self._settle(position_s, background=True)
        else:
            self._version += 1  # the position shown in the controls moved

    def keep_history(self, history_s: float) -> None:
        """Keep at least `history_s` of history from now on (a chart window was widened);
        a wider history than the store holds is rebuilt at the position."""
        interval = self.recording.header.get("interval_s")
        interval = interval if isinstance(interval, int | float) and interval > 0 else 1.0
        capacity = max(2, math.ceil(history_s / interval) + 1)
        if capacity == self._capacity:
            return
        grew = capacity > self._state.store.capacity
        self._capacity = capacity
        if not grew:
            return  # the store holds more than asked; the next rebuild keeps less
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._state = restore(self.recording, self._state.position_s, capacity)
            self._version += 1
            return
        if self._rebuilding is None:
            self._settle(self.position_s, background=True)

    async def settled(self) -> None:
        """Wait until the shown state is at the asked position (tests, snapshots)."""
        while self._rebuilding is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._rebuilding)
            await asyncio.sleep(0)

    def step(self, frames: int) -> None:
        """Move to the next (or previous) instant the recording has a poll at (a walk over
        the poll index from the position: a few frames, whatever the recording's size)."""
        recorded = self.recording.frames
        polls = recorded.indices("poll")
        if not polls:
            return
        found: list[float] = []
        if frames > 0:
            limit = self.position_s + 1e-6
            i = bisect.bisect_left(polls, recorded.applied_at(limit))
            while i < len(polls) and len(found) < frames:
                t = recorded.t_at(polls[i])
                if t > limit and t not in found:
                    found.append(t)
                i += 1
            target = found[-1] if found else recorded.t_at(polls[-1])
        else:
            limit = self.position_s - 1e-6
            i = bisect.bisect_left(polls, recorded.applied_at(limit)) - 1
            while i >= 0 and len(found) < -frames:
                t = recorded.t_at(polls[i])
                if t < limit and t not in found:
                    found.append(t)
                i -= 1
            target = found[-1] if found else recorded.t_at(polls[0])
        self.playing = False
        self.seek(target)

    def toggle(self) -> None:
        # At the end, play starts over; at the end of what is indexed so far, it plays on.
        if not self.playing and self.position_s >= self.duration_s and not self._indexing:
            self.seek(0.0)
        self.playing = not self.playing
        self._version += 1

    async def _play(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(PLAY_TICK_S)
            now = time.monotonic()
            self._follow_index()
            if self.playing and self._target_s is None:
                target = self.position_s + (now - last) * self.speed
                if target >= self.duration_s:
                    target = self.duration_s
                    # The end of what is indexed so far is not the end: play on.
                    self.playing = self._indexing
                self._seek(target)
            last = now

    async def start(self) -> None:
        self._task = asyncio.create_task(self._play())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- what the screens read -----------------------------------------------------------

    def now(self) -> float:
        """The instant the screens show (behind `position_s` while a seek rebuilds)."""
        return self.recording.t0 + self._state.position_s

    def version(self) -> int:
        return self._version

    def feed_note(self) -> FeedNote | None:
        return None

    def servers(self) -> list[ServerView]:
        views = []
        for data in self._state.servers:
            view = ServerView.from_json(data)
            if view.uptime_s is not None and view.state in LIVE_STATES:
                # The recorded uptime ages with the replay position.
                aged = view.uptime_s + (self._state.position_s - self._state.servers_t)
                view = ServerView.from_json({**data, "uptime_s": aged})
            views.append(view)
        return views

    def raw_servers(self) -> list[dict[str, Any]]:  # status JSON for snapshots, not run data
        """The server list as recorded at the position (status JSON with plans)."""
        return [dict(s) for s in self._state.servers]

    def runs(self) -> list[RunRow]:
        """The runs as the recording listed them at the position (older recordings listed
        only running campaigns)."""
        return list(self._state.runs)

    def run_summary(self, run_id: str) -> RunSummary | None:
        """The summary the recording kept for the run, by the position; None if it kept
        none (a run still running then, or a recording that predates summaries)."""
        return self._state.summaries.get(run_id)
