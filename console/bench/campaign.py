"""Run benchmark cells level by level, keeping everything on disk as it happens.

A cell is one server: launched from profile x layout x variant through a `ServerControl`
(campaigns), or an already running server (`bench --server/--url`). Each level's requests
are appended as they finish; a level line with the server's counters is written when it
ends; summaries are rebuilt after every level. `--resume` skips what is finished.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import httpx

from console import __version__
from console.bench.cells import CellTraits, meta_from_plan, meta_from_server_info
from console.bench.client import Endpoint, make_client
from console.bench.find_max import (
    LevelJudge,
    Pace,
    Search,
    describe,
    drain_limit_s,
    overdue_text,
    pace,
)
from console.bench.levels import (
    LevelOutcome,
    LevelSpec,
    Target,
    admin_headers,
    boxed,
    run_level,
    until_stopped,
)
from console.bench.listing import Progress
from console.bench.live_progress import LevelTracker
from console.bench.recorder import TelemetryRecorder
from console.bench.results import (
    CANCELLED,
    CellMeta,
    CellSummary,
    JsonDict,
    LevelRecord,
    LevelSummary,
    RequestResult,
    RunSummary,
)
from console.bench.rundir import RunDir, RunWriteError
from console.bench.runmeta import Attempt
from console.bench.search_levels import next_level, passed, sizing
from console.bench.slo import met_by
from console.bench.steady import MIN_STEADY_REQUESTS
from console.bench.summary import Judging, summarize_run, write_summaries
from console.bench.tables import fmt
from console.bench.workload import Workload
from console.core.errors import ServerStartFailed, ServerStoppedByUser, StartCancelled
from console.core.http import JSON_MAX_BYTES, get_capped
from console.core.redact import argv_secrets, field_secrets, redact_json
from console.hw.backend import GpuBackend
from console.telemetry.sglang_source import time_scale
from console.topology.placement import Plan

if TYPE_CHECKING:
    from console.bench.slo import Slo

Event = Callable[[str], None]
OUTSIDE_STOP = "server stopped by user"
"""The reason a cell and its level are interrupted when their server is stopped from outside
the campaign (the campaign then stops: no score for the cell, no next server)."""
OUTSIDE_WATCH_S = 0.5
DRAIN_POLL_S = 0.25
"""How often a search's rate level checks whether it ran past its drain limit."""
OPEN_LOOP_POOL = 1024
"""Connections for open-loop levels with no cap on requests in flight."""


@dataclass(frozen=True)
class StartedServer:
    """A server a cell runs against (launched by the control, or given by the user)."""

    server_id: str | None
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    gpus: tuple[int, ...] = ()
    plan: Plan | None = None
    """The plan the server was launched from (its JSON is kept in run.json's cell)."""


class ServerHandle(Protocol):
    """What a launched server offers a campaign (StartedServer is one)."""

    @property
    def server_id(self) -> str | None: ...

    @property
    def url(self) -> str: ...

    @property
    def headers(self) -> dict[str, str]: ...

    @property
    def gpus(self) -> tuple[int, ...]: ...

    @property
    def plan(self) -> Plan | None: ...


class ServerControl(Protocol):
    """Lifecycle as a campaign needs it (implemented over the server manager)."""

    def start(
        self,
        profile: str,
        layout: str,
        variant: str,
        on_event: Event,
        cancelled: Callable[[], bool] | None = None,
    ) -> ServerHandle:
        """Launch and wait for ready; raises ServerStartFailed with the classified reason,
        or StartCancelled (the server stopped) once `cancelled` returns True while it
        loads."""

    def failure(self, server_id: str) -> str | None:
        """Why the server died, if it did."""

    def stop(self, server_id: str, reason: str = "campaign cell done") -> list[str] | None:
        """Stop the cell's server, saying why; returns warnings (a state file left
        unwritten)."""

    def stopped_elsewhere(self, server_id: str) -> bool:
        """Whether someone else (`down`, the TUI) asked the server to stop."""


@dataclass
class CellPlan:
    cell_id: str
    profile: str | None
    layout: str | None
    variant: str | None
    meta: CellTraits = field(default_factory=CellTraits)
    fixed: ServerHandle | None = None
    """A server given on the command line (no lifecycle)."""


@dataclass
class RunOptions:
    endpoint: Endpoint
    workload: Workload
    levels: list[LevelSpec]
    """The levels to run; with a search, its first level is the template of every level
    the search runs (requests, duration, warm-up, flush, a rate search's cap)."""
    search: Search | None = None
    """Find the highest load meeting each cell's SLO instead of running `levels` as listed
    (the SLO is the run's stored request's, as its summary judges levels)."""

    def pool_size(self, levels: list[LevelSpec]) -> int:
        """Connections the run's client keeps: the most requests any level has in flight."""
        if self.search is not None and self.search.kind == "concurrency":
            return int(self.search.limit)
        capped = [lv.concurrency or 1 for lv in levels]
        if any(lv.rate is not None and lv.concurrency is None for lv in levels) or (
            self.search is not None and levels and levels[0].concurrency is None
        ):
            capped.append(OPEN_LOOP_POOL)
        return max(capped, default=1)


async def server_info(client: httpx.AsyncClient, server: ServerHandle) -> JsonDict | None:
    """The server's /server_info document (SGLang's JSON, kept verbatim once redacted)."""
    try:
        response = await get_capped(
            client,
            f"{server.url}/server_info",
            headers=server.headers,
            deadline_s=30,
            max_bytes=JSON_MAX_BYTES,
        )
        data = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def redact_server_info(info: JsonDict | None) -> JsonDict | None:
    """Server info as kept in a run: every secret-named field, the values after secret flags
    in `launch_command`, and those values wherever else they appear, replaced by ***. Real
    SGLang serves api_key, admin_api_key and ssl_keyfile_password in clear (sglang 0.5.23
    srt/server_args.py:316-333, srt/arg_groups/fields/serving.py:148-167)."""
    if info is None:
        return None
    found = field_secrets(info)
    command = info.get("launch_command")
    if isinstance(command, str):
        found |= argv_secrets(command.split())
    masked: JsonDict = redact_json(info, found)
    return masked


def fingerprint(gpu_backend: GpuBackend | None, demo: bool) -> JsonDict:
    """The host, GPUs, driver and version, as run.json records them (and summaries pass on
    unread)."""
    names: list[str] = []
    driver = None
    if gpu_backend is not None:
        from console.hw.backend import GpuDeviceError, GpuUnavailable

        try:
            gpu_backend.open()
            driver = gpu_backend.driver_version()
            for index in range(gpu_backend.device_count()):
                try:
                    names.append(gpu_backend.static_info(index).name)
                except GpuDeviceError:
                    names.append(f"GPU {index} (unreadable)")
        except GpuUnavailable as exc:
            names = [f"none ({exc.reason})"]
    distinct = sorted(set(names))
    return {
        "host": socket.gethostname(),
        "gpu_names": ", ".join(f"{names.count(n)}x {n}" for n in distinct) if names else None,
        "gpu_count": len(names),
        "driver": driver,
        "ddconsole_version": __version__,
        "demo": demo,
    }


class CampaignRunner:
    def __init__(
        self,
        run: RunDir,
        cells: list[CellPlan],
        options: RunOptions,
        *,
        control: ServerControl | None,
        gpu_backend: GpuBackend | None,
        on_event: Event,
        on_progress: Callable[[Progress], None] | None = None,
        telemetry_interval_s: float = 1.0,
        progress_interval_s: float = 1.0,
    ) -> None:
        self.run = run
        self.cells = cells
        self.options = options
        self.control = control
        self.gpu_backend = gpu_backend
        self.on_event = on_event
        self.on_progress = on_progress
        """Called with each progress written (about once a second in a level)."""
        self.telemetry_interval_s = telemetry_interval_s
        self.progress_interval_s = progress_interval_s
        self.stop = asyncio.Event()
        self.attempt = 1
        self._progress = Progress(cell=None, level=None, done=0, planned=0)
        self._attempt_started = time.monotonic()
        self._requests_planned: int | None = None
        """Requests this attempt runs in all (None when a level is timed, not counted)."""
        self._requests_finished = 0
        """Requests of this attempt's ended levels."""
        self._phase_written = 0.0
        self._tracker: LevelTracker | None = None
        """The running level's, while one runs."""
        self.stopped_from_outside: str | None = None
        self.every_level_failed = False
        """Every level run so far failed (no request finished): the run failed too."""
        """The cell whose server was stopped from outside, once that stopped the run."""
        self._latest_summary: RunSummary | None = None
        """The summary the last level wrote (a search reads its verdicts from it)."""
        self._judging: Judging | None = None
        self._paces: dict[tuple[str, int], Pace] = {}
        """How each rate level of a search kept up with its arrivals, by (cell, level), as
        measured in this attempt (the knee line shows the knee's)."""

    # -- bookkeeping ---------------------------------------------------------------------

    def _cell_meta(
        self, cell: CellPlan, change: Callable[[CellMeta], CellMeta] | None = None
    ) -> None:
        """Record the cell in run.json (added on first sight), changed by `change`."""
        meta = self.run.meta()
        entry = meta.cell(cell.cell_id)
        if entry is None:
            entry = cell.meta.apply(
                CellMeta(
                    cell_id=cell.cell_id,
                    profile=cell.profile,
                    layout=cell.layout,
                    variant=cell.variant,
                )
            )
        self.run.write_meta(meta.with_cell(entry if change is None else change(entry)))

    def _cells_on_disk(self) -> list[CellMeta]:
        return list(self.run.meta().cells)

    def _finished_levels(self, cell: CellPlan) -> set[int]:
        done = set()
        for row in self.run.read_jsonl("levels.jsonl"):
            try:
                record = LevelRecord.from_json(row)
            except ValueError:
                continue  # a line no ddconsole wrote: that level runs again
            if record.cell == cell.cell_id and record.status == "done":
                done.add(record.level)
        return done

    def _run_eta(self) -> float | None:
        """Real seconds left for the run: its elapsed time so far (launches included) times
        the requests left over those finished, over this attempt; None before any."""
        running = self._tracker.completed if self._tracker is not None else 0
        done = self._requests_finished + running
        if self._requests_planned is None or done <= 0:
            return None
        elapsed = time.monotonic() - self._attempt_started
        return max(0.0, elapsed * (self._requests_planned - done) / done)

    def _write_progress(self) -> None:
        import json

        self._progress = replace(
            self._progress, updated_wall=time.time(), run_eta_s=self._run_eta()
        )
        self.run.write_text("progress.json", json.dumps(self._progress.to_json()))
        if self.on_progress is not None:
            self.on_progress(self._progress)

    async def _tick_progress(self, tracker: LevelTracker) -> None:
        """Write the running level's progress every `progress_interval_s` until cancelled."""
        while True:
            await asyncio.sleep(self.progress_interval_s)
            self._progress = tracker.progress()
            self._write_progress()

    # -- running -------------------------------------------------------------------------

    async def run_all(self) -> str:
        """Run every unfinished cell; returns the run's final status."""
        self.run.claim()
        attempts = self.run.meta().attempts
        self.attempt = len(attempts) + 1
        started = Attempt(attempt=self.attempt, pid=os.getpid(), started_wall=time.time())
        self.run.update_meta(
            lambda meta: replace(
                meta, status="running", pid=os.getpid(), attempts=(*attempts, started)
            )
        )
        await self._stop_leftovers()
        for cell in self.cells:
            self._cell_meta(cell)
        self._attempt_started = time.monotonic()
        self._requests_planned = self._planned_requests()
        status = "done"
        try:
            for cell in self.cells:
                if self.stop.is_set():
                    break
                await self._run_cell(cell)
            if self.stop.is_set():
                status = "interrupted"
            elif self.every_level_failed or all(
                cell.status == "failed" for cell in self._cells_on_disk()
            ):
                status = "failed"
        except RunWriteError:
            status = "interrupted"
            raise
        finally:
            # The status is written while the run is still owned: a reader never sees a
            # `running` run without its owner (which reads as interrupted).
            try:
                self.run.update_meta(
                    lambda meta: replace(meta, status=status, ended_wall=time.time())
                )
                write_summaries(self.run)
            except RunWriteError:
                pass
            finally:
                self.run.release()
        return status

    async def _stop_leftovers(self) -> None:
        """Servers an interrupted earlier attempt of this run left running (a SIGKILL)."""
        if self.control is None:
            return
        for entry in self._cells_on_disk():
            if entry.status in ("starting", "running") and entry.server_id:
                self.on_event(
                    f"{entry.cell_id}: stopping {entry.server_id} left by an interrupted attempt"
                )
                await asyncio.to_thread(self.control.stop, entry.server_id)

    def _planned_requests(self) -> int | None:
        """The requests of every level this attempt still runs (None: a timed level, or a
        search, whose levels are not known ahead)."""
        if self.options.search is not None:
            return None
        total = 0
        for cell in self.cells:
            finished = self._finished_levels(cell)
            for level in self.options.levels:
                if level.index in finished:
                    continue
                if level.requests is None:
                    return None
                total += level.requests
        return total

    def _launch_event(self, cell: CellPlan, line: str) -> None:
        """A launch milestone: said as an event, and (at most once a second, `ready` always)
        as the run's phase in progress.json, so a front end shows what the run waits for."""
        self.on_event(line)
        now = time.monotonic()
        # The last milestone (`ready`) is always written: a throttled one would leave the
        # phase before it showing until the first level's progress.
        ready = line.rstrip().endswith(" ready")
        if now - self._phase_written < 1.0 and not ready:
            return
        self._phase_written = now
        self._progress = Progress(
            cell=cell.cell_id,
            level=None,
            done=0,
            planned=0,
            phase=_launch_phase(cell.cell_id, line),
        )
        self._write_progress()

    def _summary(self) -> RunSummary:
        """The run's summary as of the last level written (computed once otherwise)."""
        if self._latest_summary is None:
            self._latest_summary = summarize_run(self.run)
        return self._latest_summary

    def _judged(self) -> Judging:
        """How the summary judges this run's levels (from its stored request)."""
        if self._judging is None:
            self._judging = Judging.of(self.run.meta().request)
        return self._judging

    def _slo(self, cell: CellPlan) -> Slo | None:
        """The SLO the cell's levels are judged on: the stored request's, as the summary's."""
        return self._judged().slo(cell.profile)

    def _cell_levels(self, cell: CellPlan) -> list[LevelSummary]:
        return next(
            (list(c.levels) for c in self._summary().cells if c.cell_id == cell.cell_id), []
        )

    def _upcoming(self, cell: CellPlan) -> Callable[[], LevelSpec | None]:
        """The cell's next level each time it is called (None: the cell is done): the
        listed levels not finished yet, or the search's next load."""
        search = self.options.search
        if search is None:
            finished = self._finished_levels(cell)
            pending = iter([lv for lv in self.options.levels if lv.index not in finished])
            return lambda: next(pending, None)
        template = self.options.levels[0]
        return lambda: next_level(search, template, self._cell_levels(cell))

    async def _run_cell(self, cell: CellPlan) -> None:
        upcoming = self._upcoming(cell)
        first = upcoming()
        if first is None:
            self.on_event(f"{cell.cell_id}: already done, skipped")
            return
        self._cell_meta(cell, lambda c: replace(c, status="starting", reason=None))
        started: ServerHandle | None = cell.fixed
        if started is None:
            assert self.control is not None
            # The start waits for ready in a thread (up to half an hour for a real model):
            # the runner's stop reaches it through a thread-safe event it polls each tick.
            cancel = threading.Event()
            relay = asyncio.create_task(self._relay_stop(cancel))
            try:
                self._phase_written = 0.0
                self._launch_event(cell, f"{cell.cell_id}: launching")
                loop = asyncio.get_running_loop()

                def said(line: str) -> None:  # from the start's thread, onto the loop
                    loop.call_soon_threadsafe(self._launch_event, cell, line)

                started = await asyncio.to_thread(
                    self.control.start,
                    cell.profile or "",
                    cell.layout or "",
                    cell.variant or "",
                    said,
                    cancel.is_set,
                )
            except StartCancelled as exc:
                # Stopped by the campaign's own stop: resumable, not a failure of the cell.
                self._cell_meta(
                    cell, lambda c: replace(c, status="interrupted", reason="campaign stopped")
                )
                self.on_event(f"{cell.cell_id}: interrupted: {exc.message}")
                write_summaries(self.run)
                return
            except ServerStoppedByUser as exc:
                self._cell_meta(
                    cell, lambda c: replace(c, status="interrupted", reason=OUTSIDE_STOP)
                )
                self.on_event(f"{cell.cell_id}: interrupted: {exc.message}; the campaign stops")
                self.stopped_from_outside = cell.cell_id
                self.stop.set()
                write_summaries(self.run)
                return
            except ServerStartFailed as exc:
                why = exc.message
                self._cell_meta(cell, lambda c: replace(c, status="failed", reason=why))
                self.on_event(f"{cell.cell_id}: FAILED to start: {exc.message}")
                write_summaries(self.run)
                return
            finally:
                relay.cancel()
                await asyncio.gather(relay, return_exceptions=True)
        try:
            await self._run_levels(cell, started, first, upcoming)
        finally:
            # A server stopped from outside is that stopper's now (a `restart` brought it
            # back on purpose): the campaign leaves it alone.
            mine = self.stopped_from_outside != cell.cell_id
            if mine and cell.fixed is None and started.server_id and self.control is not None:
                self.on_event(f"{cell.cell_id}: stopping {started.server_id}")
                why = "campaign stopped" if self.stop.is_set() else "campaign cell done"
                warnings = await asyncio.to_thread(self.control.stop, started.server_id, why)
                for line in warnings or ():
                    self.on_event(f"{cell.cell_id}: {line}")

    async def _relay_stop(self, cancel: threading.Event) -> None:
        """Set `cancel` once the runner's stop is set (until cancelled itself)."""
        await self.stop.wait()
        cancel.set()

    async def _run_levels(
        self,
        cell: CellPlan,
        server: ServerHandle,
        first: LevelSpec,
        upcoming: Callable[[], LevelSpec | None],
    ) -> None:
        async with make_client(self.options.pool_size([first, *self.options.levels])) as client:
            asked = await until_stopped(boxed(server_info(client, server)), self.stop)
            if asked is None:
                return
            info = asked[0]
            scale = time_scale(info)
            target = Target(
                server.url,
                dict(server.headers),
                (info or {}).get("served_model_name"),
                scale,
                info,
                admin_headers(server.plan),
            )
            derived = meta_from_plan(server.plan) if server.plan else meta_from_server_info(info)
            version = (info or {}).get("version")
            self._cell_meta(
                cell,
                lambda c: replace(
                    derived.apply(c),
                    status="running",
                    server_id=server.server_id,
                    url=server.url,
                    gpus=tuple(server.gpus),
                    plan=None if server.plan is None else server.plan.to_json(),
                    server_info=redact_server_info(info),
                    sglang_version=None if version is None else str(version),
                    time_scale=scale,
                ),
            )
            if scale != 1.0:
                self.run.update_meta(lambda meta: replace(meta, time_scale=scale))
            recorder = TelemetryRecorder(
                self.run,
                self.gpu_backend,
                target,
                client,
                interval_s=self.telemetry_interval_s,
                server_id=server.server_id or server.url,
            )
            await recorder.start()
            if self.options.search is not None:
                text = search_text(self.options.search, self._slo(cell), self.options.levels[0])
                self.on_event(f"{cell.cell_id}: {text}")
            else:
                for line in short_levels(self.options.levels):
                    self.on_event(f"{cell.cell_id}: {line}")
            try:
                level: LevelSpec | None = first
                # A level index proposed twice in one attempt (a summary that lost its
                # level) ends the cell instead of measuring it forever.
                ran: set[int] = set()
                while level is not None and level.index not in ran:
                    if self.stop.is_set():
                        break
                    ran.add(level.index)
                    outcome = await self._run_level(
                        cell, client, target, level, server.server_id or server.url
                    )
                    if outcome is None:
                        return
                    level = upcoming()
            finally:
                await recorder.stop()
        if not self.stop.is_set():
            self._cell_meta(cell, lambda c: replace(c, status="done"))
            if self.options.search is not None:
                self.on_event(f"{cell.cell_id}: {self._knee_line(cell)}")

    async def _run_level(
        self,
        cell: CellPlan,
        client: httpx.AsyncClient,
        target: Target,
        level: LevelSpec,
        server: str,
    ) -> LevelOutcome | None:
        planned = level.requests or 0
        tracker = LevelTracker(
            Progress(cell=cell.cell_id, level=level.index, done=0, planned=planned, server=server),
            level,
            levels=0 if self.options.search is not None else len(self.options.levels),
            time_scale=target.time_scale,
        )
        self._tracker = tracker
        self._progress = tracker.progress()
        self._write_progress()
        self.on_event(f"{cell.cell_id}: level {level.index + 1} ({level.label})")

        watched = server if cell.fixed is None and self.control is not None else None
        # The level's own stop: set by the campaign's stop, or by the level clearly failing
        # its SLO (then the level is done, not interrupted).
        level_stop = asyncio.Event()
        slo = self._slo(cell)
        judge = None
        if slo is not None and self.options.search is not None:
            judge = self._judge(level, slo)
        first_finish: list[float] = []  # when the first request finished: the window opens
        first_send: list[float] = []  # the earliest send seen: a rate level's clock
        ended = [0]  # requests ended (failures included, cancelled ones not)
        overdue: list[str] = []  # why a rate level was stopped past its drain limit

        def judge_result(result: RequestResult) -> None:
            """Stop the level once it cannot meet the SLO any more (a search's levels)."""
            if judge is None or slo is None or level_stop.is_set():
                return
            if result.error is None and result.e2e_s is not None:
                finish = result.send_wall + result.e2e_s / target.time_scale
                first_finish[:] = [min([finish, *first_finish])]
            # Inside the steady window (sent in [first completion, last send)) whatever the
            # rest of the level does: sent after the first completion, and not the last
            # send. When the k-th completion arrives, k - 1 + N requests have been sent at
            # most, so with k <= P - N a later send is still to come.
            ordinal = judge.met + judge.missed + 1
            in_window = bool(first_finish) and result.send_wall >= first_finish[0]
            in_window = in_window and ordinal <= (level.requests or 0) - judge.ramp
            if judge.add(met_by(slo, result), in_window):
                level_stop.set()
                self.on_event(f"{cell.cell_id}: level {level.index + 1} {judge.why(slo.label())}")

        def on_result(index: int, result: RequestResult) -> None:
            cancelled = result.error == CANCELLED
            if result.error is not None and not cancelled and watched is not None:
                # A refused or broken request is the first sign of a `down`: stop the level
                # before the rest of it fails against a server that is gone.
                self._check_outside_stop(cell, watched)
            self.run.append(
                "requests.jsonl",
                {
                    "cell": cell.cell_id,
                    "level": level.index,
                    "attempt": self.attempt,
                    "index": index,
                    **result.to_json(),
                },
                finite=False,
            )
            if not cancelled:
                tracker.add(result)
                first_send[:] = [min([result.send_wall, *first_send])]
                ended[0] += 1
                judge_result(result)

        async def watch_drain(requests: int, rate: float) -> None:
            """Stop a search's rate level still running past its drain limit: the server
            fell behind, and its queue would take (rate - capacity) x the level's length /
            capacity to drain."""
            limit_s = drain_limit_s(requests, rate)
            # Once every request ended nothing is in flight (the level reads its counters).
            while not level_stop.is_set() and ended[0] < requests:
                await asyncio.sleep(DRAIN_POLL_S)
                late = first_send and (time.time() - first_send[0]) * target.time_scale > limit_s
                if late and ended[0] < requests:
                    overdue.append(overdue_text(ended[0], requests, rate))
                    self.on_event(f"{cell.cell_id}: level {level.index + 1} {overdue[0]}")
                    level_stop.set()
                    return

        ticker = asyncio.create_task(self._tick_progress(tracker))
        watcher = asyncio.create_task(self._watch_outside_stop(cell, watched)) if watched else None
        relay = asyncio.create_task(_relay(self.stop, level_stop))
        drain = None
        if self.options.search is not None and level.rate and level.requests:
            drain = asyncio.create_task(watch_drain(level.requests, level.rate))
        try:
            outcome = await run_level(
                client,
                target,
                self.options.endpoint,
                self.options.workload,
                level,
                on_result=on_result,
                stop=level_stop,
            )
        finally:
            for task in (ticker, watcher, relay, drain):
                if task is not None:
                    task.cancel()
            await asyncio.gather(
                *(t for t in (ticker, watcher, relay, drain) if t), return_exceptions=True
            )
        self._progress = tracker.progress()
        self._requests_finished += tracker.completed
        self._tracker = None
        self._write_progress()
        errors = [r for r in outcome.results if r.error and r.error != CANCELLED]
        failure = None
        if errors and watched is not None:
            self._check_outside_stop(cell, watched)
        outside = self.stopped_from_outside == cell.cell_id
        if errors and watched is not None and not outside:
            failure = await asyncio.to_thread(self._failure_of, cell)
        judged_early = judge is not None and judge.stopped
        stopped_early = judged_early or bool(overdue)
        interrupted = outcome.interrupted and not stopped_early
        status = "interrupted" if interrupted or outside else "done"
        early_stop = judge.why(slo.label()) if judge and judged_early and slo else None
        early_stop = early_stop or (overdue[0] if overdue else None)
        kept = None
        behind = None
        if self.options.search is not None and level.rate is not None:
            sent = [r for r in outcome.results if r.error != CANCELLED]
            kept = pace(sent, level.rate, target.time_scale)
            self._paces[(cell.cell_id, level.index)] = kept
            if early_stop is None and status == "done":
                # A server short of the rate fails the level whatever its latencies say.
                behind = kept.behind
        if failure and status == "done":
            status = "failed"
        record = LevelRecord(
            cell=cell.cell_id,
            level=level.index,
            attempt=self.attempt,
            label=level.label,
            concurrency=level.concurrency,
            rate=level.rate,
            requests_planned=level.requests,
            started_wall=outcome.started_wall,
            ended_wall=outcome.ended_wall,
            wall_s=outcome.wall_s,
            time_scale=target.time_scale,
            counters_before=outcome.counters_before,
            counters_after=outcome.counters_after,
            status=status,
            error=OUTSIDE_STOP if outside else failure,
            flush_error=outcome.flush_error,
            early_stop=early_stop,
            achieved_rate=kept.achieved if kept else None,
            sent_rate=kept.sent_rate if kept else None,
            behind=behind,
        )
        self.run.append("levels.jsonl", record.to_json())
        if outcome.flush_error:
            self.on_event(f"{cell.cell_id}: level {level.index + 1}: {outcome.flush_error}")
        summary = write_summaries(self.run)
        self._latest_summary = summary
        measured = [lv for c in summary.cells for lv in c.levels]
        self.every_level_failed = bool(measured) and all(lv.status == "failed" for lv in measured)
        level_summary = next(
            (
                lv
                for c in summary.cells
                if c.cell_id == cell.cell_id
                for lv in c.levels
                if lv.level == level.index
            ),
            None,
        )
        if level_summary is not None:
            self.on_event(_level_line(cell.cell_id, level_summary, slo, kept))
        if outside:
            self._cell_meta(cell, lambda c: replace(c, status="interrupted", reason=OUTSIDE_STOP))
            self.on_event(f"{cell.cell_id}: interrupted: {OUTSIDE_STOP}; the campaign stops")
            return None
        if failure:
            self._cell_meta(cell, lambda c: replace(c, status="failed", reason=failure))
            self.on_event(f"{cell.cell_id}: FAILED: {failure}")
            return None
        return outcome

    def _judge(self, level: LevelSpec, slo: Slo) -> LevelJudge:
        """The early-stop judge of a search level, judging as the summary will: a closed
        loop on its steady window unless transients are included."""
        closed = level.rate is None and not self._judged().include_transients
        return LevelJudge(
            level.requests,
            slo.attainment,
            ramp=(level.concurrency or 1) if closed else 0,
            min_window=MIN_STEADY_REQUESTS,
        )

    def _knee_line(self, cell: CellPlan) -> str:
        """The search's result for the cell, with the loads it measured in order."""
        found = next((c for c in self._summary().cells if c.cell_id == cell.cell_id), None)
        if found is not None and found.knee is not None:
            knee = found.knee
            loads = ", ".join(f"{load:g}" for load in knee.loads)
            return f"{knee.text()}{self._knee_pace(found)} (measured {loads})"
        # One level judged (the first load failed, or the limit was the first load).
        search, slo = self.options.search, self._slo(cell)
        levels = [lv for lv in self._cell_levels(cell) if lv.status == "done"]
        if search is None or slo is None or not levels:
            return "search done: no level judged"
        first = levels[0]
        verdict = "meets" if passed(first) else "misses"
        return (
            f"{verdict} {slo.label()} for {slo.attainment * 100:g}% of requests at "
            f"{first.label or 'its first load'} (measured only that level)"
        )

    def _knee_pace(self, cell: CellSummary) -> str:
        """`; at 8/s it completed 7.9/s` for a rate knee measured in this attempt."""
        knee = cell.knee
        if knee is None or knee.kind != "rate" or knee.value is None or knee.achieved is not None:
            # A knee with its achieved rate says it itself (`Knee.text`).
            return ""
        levels = [lv for lv in cell.levels if lv.rate == knee.value and lv.status == "done"]
        kept = self._paces.get((cell.cell_id, levels[-1].level)) if levels else None
        if kept is None or kept.achieved is None:
            return ""
        return f"; at {knee.value:g}/s it completed {kept.achieved:.3g}/s"

    def _check_outside_stop(self, cell: CellPlan, server_id: str) -> None:
        """Stop the run when the cell's server was asked to stop by someone else."""
        if self.stopped_from_outside is not None or self.control is None:
            return
        if self.control.stopped_elsewhere(server_id):
            self.stopped_from_outside = cell.cell_id
            self.stop.set()

    async def _watch_outside_stop(self, cell: CellPlan, server_id: str) -> None:
        """Check for an outside stop twice a second while the level runs (a server stopped
        between requests fails none of them)."""
        while self.stopped_from_outside is None:
            await asyncio.sleep(OUTSIDE_WATCH_S)
            self._check_outside_stop(cell, server_id)

    def _failure_of(self, cell: CellPlan) -> str | None:
        entry = next((c for c in self._cells_on_disk() if c.cell_id == cell.cell_id), None)
        server_id = entry.server_id if entry is not None else None
        if not server_id or self.control is None:
            return None
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            reason = self.control.failure(server_id)
            if reason:
                return reason
            time.sleep(0.1)
        return None


async def _relay(source: asyncio.Event, target: asyncio.Event) -> None:
    """Set `target` once `source` is set (until cancelled)."""
    await source.wait()
    target.set()


def search_text(search: Search, slo: Slo | None, template: LevelSpec) -> str:
    """`searching concurrency from 1 up to 64 (step 1) for TTFT ≤ 200 ms at 95% of
    requests; each level sends max(16, 3 x streams + 3) requests, ...`."""
    goal = f" for {slo.label()} at {slo.attainment * 100:g}% of requests" if slo else ""
    return f"searching {describe(search)}{goal}; {sizing(search, template)}"


def short_levels(levels: list[LevelSpec]) -> list[str]:
    """A warning for each closed-loop level that sends fewer requests than its streams: its
    load is never in flight, so it is left out of the knee."""
    return [
        f"level {level.index + 1} (concurrency {level.concurrency}) sends {level.requests}"
        f" requests, fewer than its streams: that load is never in flight and the level is"
        f" left out of the knee; give --requests (campaign: `requests`) of at least"
        f" {3 * level.concurrency + 3} for a steady window"
        for level in levels
        if level.rate is None
        and level.concurrency
        and level.requests is not None
        and level.requests < level.concurrency
    ]


def _slo_text(level: LevelSummary, slo: Slo | None) -> str:
    """`, SLO met by 94% (fails), goodput 812.3 tok/s` when the run has an SLO."""
    if slo is None:
        return ""
    met = "-" if level.slo_attainment is None else f"{level.slo_attainment:.0%}"
    verdict = {True: " (passes)", False: " (fails)", None: ""}[level.slo_pass]
    if level.early_stop is not None:
        # `stopped early` or `fell behind`: the reason's head; the whole is in --json.
        verdict = f" (fails: {level.early_stop.split(':')[0]})"
    elif level.behind is not None:
        verdict = " (fails: fell behind)"
    return f", SLO met by {met}{verdict}, goodput {fmt(level.goodput_tok_s, '.1f')} tok/s"


def _level_line(
    cell_id: str, level: LevelSummary, slo: Slo | None = None, kept: Pace | None = None
) -> str:
    errors = f", {level.errors} errors" if level.errors else ""
    if level.status == "failed" or (level.status == "interrupted" and level.reason):
        # No throughput for a failed or cut-short level: why it ended instead.
        return (
            f"{cell_id}: level {level.level + 1} {level.status}: {level.reason or '?'}"
            f" ({level.requests} requests{errors})"
        )
    return (
        f"{cell_id}: level {level.level + 1} done: {fmt(level.output_tok_s, '.1f')}"
        f" tok/s, accept {fmt(level.accept_length, '.2f')}, step "
        f"{fmt(level.step_time_s, '.1f', 1000)} ms, TTFT p50 "
        f"{fmt(level.ttft.p50, '.0f', 1000)} ms, ITL p50 "
        f"{fmt(level.itl.p50, '.1f', 1000)} ms{_slo_text(level, slo)}"
        f"{'' if kept is None else ', ' + kept.text()} ({level.requests} requests{errors})"
    )


def _launch_phase(cell_id: str, line: str) -> str:
    """`launching qwen3.6-27b-tp1-2: weights loaded (1.9 s)` from a launch event line."""
    text = " ".join(line.split()).removeprefix(f"{cell_id}: ")
    if text == "launching":
        return text
    found = re.match(r"^(\S+) ([0-9.]+)s (.+)$", text)
    if found:
        return f"launching {found[1]}: {found[3]} ({found[2]} s)"
    return f"launching {text}"
