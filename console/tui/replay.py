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
from pathlib import Path
from typing import Any

from console.bench.listing import RunRow
from console.bench.request import BenchRequest, CampaignRequest
from console.bench.results import JsonDict, RunSummary
from console.profiles.loader import ProfileCatalog
from console.telemetry.poller import write_result
from console.telemetry.recording import Recording
from console.telemetry.store import TimeSeriesStore
from console.topology.model import GpuInfo, NumaNode, Topology
from console.topology.placement import Plan
from console.tui.backend import ActionRefused, Progress, ReplayControls
from console.tui.views import LIVE_STATES, ServerView

PLAY_TICK_S = 0.25
HISTORY_S = 1800.0
"""History a replay's store keeps by default: the longest chart window the dashboard offers
(screens/dashboard.py WINDOWS_S). A seek rebuilds this much, so it bounds a seek's cost."""
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
        self.store = TimeSeriesStore(max(2, math.ceil(history_s / interval) + 1))
        self.replay: ReplayControls | None = self
        self.playing = playing
        self.speed = speed
        self.duration_s = recording.duration_s
        self.position_s = 0.0
        self.message = (
            None
            if recording.damage is None
            else (
                f"recording damaged: {recording.damage}; replaying up to "
                f"{recording.duration_s:.0f} s"
            )
        )
        self._applied = 0
        self._servers: list[dict[str, Any]] = []  # recorded status JSON, not run data
        self._servers_t = 0.0
        self._runs: list[RunRow] = []
        self._summaries: dict[str, RunSummary] = {}
        self._version = 0
        self._task: asyncio.Task[None] | None = None
        self.seek(self.duration_s if position_s is None else position_s)

    # -- playback ------------------------------------------------------------------------

    def _reset(self) -> None:
        self.store = TimeSeriesStore(self.store.capacity)
        self._applied = 0
        self._servers = []
        self._runs = []
        self._summaries = {}

    def _apply(self, index: int) -> None:
        frame = self.recording.frames[index]
        if frame.kind == "poll":
            try:
                write_result(self.store, self.recording.poll_result(frame))
            except (ValueError, KeyError, TypeError):
                pass  # one bad frame is skipped, not the replay
        elif frame.kind == "servers":
            self._servers = list(frame.data.get("v") or [])
            self._servers_t = frame.t
        elif frame.kind == "runs":
            self._runs = _run_rows(frame.data.get("v"))
        elif frame.kind == "run_summary":
            self._apply_summary(frame.data)

    def _apply_until(self, position_s: float) -> None:
        frames = self.recording.frames
        while self._applied < len(frames) and frames.t_at(self._applied) <= position_s + 1e-9:
            self._applied += 1
            self._apply(self._applied - 1)
        self.store.commit()

    def _restore(self, end: int) -> None:
        """The state after the first `end` frames, from a bounded number of them: the
        latest frame of each kind whose latest wins (servers, runs), every run summary, and
        of each source only the polls the store's history holds (its capacity)."""
        frames = self.recording.frames
        self._reset()
        for kind in ("servers", "runs"):
            where = frames.indices(kind)
            last = bisect.bisect_left(where, end) - 1
            if last >= 0:
                self._apply(where[last])
        summaries = frames.indices("run_summary")
        for i in summaries[: bisect.bisect_left(summaries, end)]:
            self._apply(i)
        for i in frames.last_polls(end, self.store.capacity):
            self._apply(i)
        self._applied = end
        self.store.commit()

    def seek(self, position_s: float) -> None:
        position_s = max(0.0, min(self.duration_s, position_s))
        frames = self.recording.frames
        if frames.is_spooled:
            # A recording read from a file (any size): forward by a few polls goes on from
            # where the replay is; anything else rebuilds from the frames that matter.
            end = frames.applied_at(position_s)
            polls = frames.indices("poll")
            ahead = bisect.bisect_left(polls, end) - bisect.bisect_left(polls, self._applied)
            if position_s < self.position_s or self._applied == 0 or ahead > self.store.capacity:
                self._restore(end)
        elif position_s < self.position_s or self._applied == 0:
            self._reset()  # built in memory (a run's telemetry): small, replayed whole
        self.position_s = position_s
        self._apply_until(position_s)
        self._version += 1

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
        if not self.playing and self.position_s >= self.duration_s:
            self.seek(0.0)
        self.playing = not self.playing
        self._version += 1

    async def _play(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(PLAY_TICK_S)
            now = time.monotonic()
            if self.playing:
                target = self.position_s + (now - last) * self.speed
                if target >= self.duration_s:
                    target = self.duration_s
                    self.playing = False
                self.seek(target)
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
        return self.recording.t0 + self.position_s

    def version(self) -> int:
        return self._version

    def servers(self) -> list[ServerView]:
        views = []
        for data in self._servers:
            view = ServerView.from_json(data)
            if view.uptime_s is not None and view.state in LIVE_STATES:
                # The recorded uptime ages with the replay position.
                aged = view.uptime_s + (self.position_s - self._servers_t)
                view = ServerView.from_json({**data, "uptime_s": aged})
            views.append(view)
        return views

    def raw_servers(self) -> list[dict[str, Any]]:  # status JSON for snapshots, not run data
        """The server list as recorded at the position (status JSON with plans)."""
        return [dict(s) for s in self._servers]

    def _apply_summary(self, data: JsonDict) -> None:
        try:
            summary = RunSummary.from_json(data.get("v"))
        except ValueError:
            return  # a summary of another schema shows as none, the replay goes on
        self._summaries[str(data.get("id") or summary.run_id)] = summary

    def runs(self) -> list[RunRow]:
        """The runs as the recording listed them at the position (older recordings listed
        only running campaigns)."""
        return list(self._runs)

    def run_summary(self, run_id: str) -> RunSummary | None:
        """The summary the recording kept for the run, by the position; None if it kept
        none (a run still running then, or a recording that predates summaries)."""
        return self._summaries.get(run_id)
