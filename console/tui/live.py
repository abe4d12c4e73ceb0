"""The live backend: the real (or demo) services, monitored in the TUI's own event loop."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from console.bench.listing import DiskRuns, RunRow
from console.bench.results import RunSummary
from console.bench.shipped import DEMO_CAMPAIGN, campaign_files
from console.core.errors import ConsoleError
from console.core.net import port_is_free
from console.core.units import format_index_set
from console.profiles.command import build_command
from console.profiles.flagcheck import FlagCheckUnavailable, check_args
from console.profiles.loader import ProfileCatalog
from console.server.external import ID_PREFIX, ExternalServer, listing_json
from console.server.manager import ServerManager
from console.server.status import ServerStatus
from console.telemetry.store import TimeSeriesStore
from console.topology.model import Topology
from console.topology.placement import REDACTED, Plan, PlanWarning, next_free_port, resolve
from console.tui.backend import ActionRefused, Progress, ReplayControls
from console.tui.prom_views import PROMETHEUS, feed_note, prometheus_views
from console.tui.views import FeedNote, ServerView

if TYPE_CHECKING:
    from console.bench.request import BenchRequest, CampaignRequest, RunRequest
    from console.fleet.fleet import Fleet
    from console.server.monitor import Monitor, MonitorFactory
    from console.server.session_recorder import SessionRecorder
    from console.telemetry.prom_source import PrometheusSource


STOP_RUN_TIMEOUT_S = 90.0
"""How long the Bench screen waits for a stopped run's runner to end (it stops the
campaign's server with its grace period first)."""


def view_of(status: ServerStatus) -> ServerView:
    data = status.to_json()
    data["plan"] = status.record.plan.to_json()
    return ServerView.from_json(data)


def _outcome(status: ServerStatus, progress: Progress) -> ServerView:
    """Say where a launched server ended up (ready, failed, or still starting)."""
    reason = f" ({status.reason})" if status.reason else ""
    progress(f"{status.id}: {status.state.value}{reason}")
    return view_of(status)


def external_view(server: ExternalServer) -> ServerView:
    """A server ddconsole did not start: its (masked) argv stands in for a plan."""
    return ServerView.from_json(listing_json(server))


def external_refusal(server_id: str) -> ActionRefused:
    return ActionRefused(
        f"{server_id} is external (ddconsole did not start it): the console never signals "
        f"it; to stop it anyway: `ddconsole down {server_id} --external --yes`"
    )


DEMO_SWEEP_REQUESTS = 4
DEMO_SWEEP_OUTPUT_LEN = 64
"""The demo sweep's requests per level and output length on the simulator."""


class LiveBackend:
    read_only = False
    read_only_reason: str | None = None
    """Set by `make_read_only`: the notice every refused action gives."""
    replay: ReplayControls | None = None

    def __init__(
        self,
        *,
        demo: bool,
        manager: ServerManager,
        monitor_factory: MonitorFactory,
        topology: Topology,
        catalog: ProfileCatalog,
        runs_root: Path,
        campaigns: list[Path] | None = None,
        interval_s: float = 1.0,
        recordings: Path | None = None,
        record_max_bytes: int | None = None,
        fleet_factory: Callable[..., Fleet] | None = None,
    ) -> None:
        self.demo = demo
        self.manager = manager
        self.topology = topology
        self.catalog = catalog
        self.runs_root = runs_root
        self.campaigns = campaign_files() if campaigns is None else campaigns
        self.monitor_factory = monitor_factory
        """Builds the monitor (the composition root's, `Services.monitor`)."""
        self.interval_s = interval_s
        self.store = TimeSeriesStore()
        self.monitor: Monitor | None = None
        """Made by `start` (its HTTP stack is a fifth of a second of imports: the first
        frame does not wait for it)."""
        self.recordings = recordings
        """Where the flight recorder writes (None: not recording)."""
        self.record_max_bytes = record_max_bytes
        self.recorder: SessionRecorder | None = None
        self._event_count = 0
        self._views: tuple[int, list[ServerView]] = (-1, [])
        self.fleet_factory = fleet_factory
        """Builds the fleet of hosts.toml (the composition root's); None: no fleet view."""
        self.fleet: Fleet | None = None
        """Started with the console when hosts.toml names a host besides this one (every
        screen then groups by host), else by the first `open_fleet` (the Fleet screen)."""

    def make_read_only(self, reason: str) -> None:
        """Show everything, refuse every action with `reason` (a shared box)."""
        self.read_only = True
        self.read_only_reason = reason

    def _refuse_if_read_only(self) -> None:
        if self.read_only:
            raise ActionRefused(self.read_only_reason or "read-only: actions are refused")

    def now(self) -> float:
        return time.monotonic()

    def version(self) -> int:
        changes = self.monitor.change_count if self.monitor else 0
        hosts = self.fleet.version if self.fleet else 0
        return self.store.version + changes + self._event_count + hosts

    async def open_fleet(self) -> Fleet:
        if self.fleet is None:
            if self.fleet_factory is None:
                raise ActionRefused("this console has no fleet (no hosts file is read)")
            try:
                fleet = self.fleet_factory(local_reading=self._local_reading)
            except ConsoleError as exc:
                raise ActionRefused(exc.message) from None
            await fleet.start()
            self.fleet = fleet
        return self.fleet

    def fleet_now(self) -> Fleet | None:
        return self.fleet

    def _local_reading(self) -> dict[str, object] | None:
        """This host's reading for the fleet, from the console's own monitor (the one that
        already scrapes these servers), None before it has started."""
        from console.server.monitor import reading

        return None if self.monitor is None else reading(self.monitor)

    async def _start_fleet_with_hosts(self) -> None:
        """Start the fleet now when hosts.toml lists another host; a damaged hosts file is
        left for the Fleet screen to name (this console then runs as on one host)."""
        from console.fleet.hosts import load_hosts

        if self.fleet_factory is None:
            return
        try:
            # The hosts file first: the fleet's SSH stack is not imported for one host.
            if all(host.is_local for host in load_hosts()):
                return
            # The SSH stack's import takes a few tenths of a second: not on the UI loop.
            await asyncio.to_thread(importlib.import_module, "console.fleet.fleet")
            fleet = self.fleet_factory(local_reading=self._local_reading)
        except ConsoleError:
            return
        await fleet.start()
        self.fleet = fleet

    async def start(self) -> None:
        await self._start_fleet_with_hosts()
        # Server state once a second, in step with the screen's refresh: a crash shows on
        # the next tick or the one after, for a quarter of the CLI's 4 Hz watch cost.
        self.monitor = self.monitor_factory(
            manager=self.manager, store=self.store, interval_s=self.interval_s, sync_interval_s=1.0
        )
        if self.recordings is not None:
            from console.server.session_recorder import DEFAULT_MAX_BYTES, SessionRecorder

            self.recorder = SessionRecorder(
                self.monitor,
                self.recordings,
                demo=self.demo,
                topology=self.topology,
                max_bytes=self.record_max_bytes or DEFAULT_MAX_BYTES,
                runs=self.runs,
                run_summary=self.run_summary,
                cached_summary=DiskRuns(self.runs_root).cached_summary,
            )
            self.recorder.start()
            if self.recorder.error:
                self._note(self.recorder.error)
        await self.monitor.start()

    def runs(self) -> list[RunRow]:
        return DiskRuns(self.runs_root).runs()

    def run_summary(self, run_id: str) -> RunSummary | None:
        return DiskRuns(self.runs_root).run_summary(run_id)

    async def stop(self) -> None:
        # The monitor first: every poll that reached the store also reaches the recording.
        if self.monitor is not None:
            await self.monitor.stop()
        if self.fleet is not None:
            await self.fleet.stop()
        if self.recorder is not None:
            self.recorder.close()

    def servers(self) -> list[ServerView]:
        """Views of the watcher's current list (and of what Prometheus scrapes, when the
        console reads through one), rebuilt only when the store moved."""
        version = self.version()
        if self._views[0] != version:
            views = [view_of(s) for s in self._statuses()]
            views += [external_view(e) for e in self._externals()]
            prometheus = self._prometheus()
            if prometheus is not None:
                views += prometheus_views(prometheus, self.store)
            self._views = (version, views)
        return self._views[1]

    def _prometheus(self) -> PrometheusSource | None:
        """The Prometheus source the composition root gave the monitor, if any."""
        if self.monitor is None:
            return None
        from console.telemetry.prom_source import PrometheusSource

        source = self.monitor.poller.sources.get(PROMETHEUS)
        return source if isinstance(source, PrometheusSource) else None

    def feed_note(self) -> FeedNote | None:
        prometheus = self._prometheus()
        return None if prometheus is None else feed_note(prometheus)

    def _is_external(self, server_id: str) -> bool:
        return server_id.startswith(ID_PREFIX) and server_id not in self.manager.records.ids()

    def _refuse_if_not_ours(self, server_id: str) -> None:
        """A server this console did not start: refused with how to reach it instead."""
        if self._is_external(server_id):
            raise external_refusal(server_id)
        prometheus = self._prometheus()
        if prometheus is not None and server_id in prometheus.instances:
            raise ActionRefused(
                f"{server_id} is read through Prometheus ({prometheus.url}): the console "
                "does not act on it; run ddconsole on its host to stop or restart it"
            )

    def _externals(self) -> list[ExternalServer]:
        if self.monitor is None or self.monitor.watcher is None:
            return []
        return self.monitor.watcher.external

    def _statuses(self) -> list[ServerStatus]:
        if self.monitor is None or self.monitor.watcher is None:
            return []
        return self.monitor.watcher.current

    def _note(self, text: str) -> None:
        """An action's outcome, kept in the flight recording."""
        self._event_count += 1
        if self.recorder is not None:
            self.recorder.event(text)

    # -- plans ---------------------------------------------------------------------------

    def plan(self, profile: str, layout: str, variant: str, replacing: str | None = None) -> Plan:
        """Resolve a plan; `replacing` names a server a switch will stop first, so its
        GPUs and port count as free."""
        self._refuse_if_read_only()
        try:
            loaded = self.catalog.get(profile)
            gpus = self._free_gpus_like(loaded.profile.layouts[layout].gpus, replacing)
            port = self._free_port(
                loaded.profile.server.port, loaded.profile.server.host, replacing
            )
            command = build_command(loaded, layout, variant, port=port, demo=self.demo, gpus=gpus)
            plan = resolve(command, self.topology)
        except ConsoleError as exc:
            raise ActionRefused(exc.message) from None
        except KeyError as exc:
            raise ActionRefused(f"{profile} has no {exc.args[0]!r}") from None
        moved = self._moves(plan, loaded.profile.server.port, loaded.profile.layouts[layout].gpus)
        return dataclasses.replace(plan, warnings=(*moved, *plan.warnings)) if moved else plan

    def _moves(self, plan: Plan, port: int, gpus: tuple[int, ...]) -> list[PlanWarning]:
        """Say where a plan left the profile's port or GPUs and why, as `ddconsole up`
        does (the preview and the activity pane show a plan's warnings)."""
        from console.server import actions

        moved = []
        if plan.port != port:
            held = actions.port_held(self.manager, dataclasses.replace(plan, port=port))
            why = held or f"port {port} is taken"
            moved.append(PlanWarning("port-moved", f"{why}; using port {plan.port}"))
        if tuple(plan.gpus) != tuple(gpus):
            holders = sorted({s.id for s in self._busy() if set(s.record.plan.gpus) & set(gpus)})
            by = f" by {', '.join(holders)}" if holders else ""
            moved.append(
                PlanWarning(
                    "gpus-moved",
                    f"GPUs {format_index_set(gpus)} are held{by}; using GPUs "
                    f"{format_index_set(plan.gpus)}",
                )
            )
        return moved

    def _busy(self, replacing: str | None = None) -> list[ServerStatus]:
        return [s for s in self._statuses() if not s.state.terminal and s.id != replacing]

    def _free_gpus_like(
        self, wanted: tuple[int, ...], replacing: str | None
    ) -> tuple[int, ...] | None:
        """The layout's own GPUs when free; in demo mode, else free ones of its size (the
        replaced server's first), so a demo server is always two keystrokes away."""
        held = {g for s in self._busy(replacing) for g in s.record.plan.gpus}
        if not held & set(wanted) or not self.demo:
            return None
        freed = [g for s in self._statuses() if s.id == replacing for g in s.record.plan.gpus]
        free = freed + [g.index for g in self.topology.gpus if g.index not in held | set(freed)]
        if len(free) < len(wanted):
            return None
        return tuple(sorted(free[: len(wanted)]))

    def _free_port(self, preferred: int, host: str, replacing: str | None) -> int | None:
        """None to keep the profile's port; else the next one that no active server is
        promised and nothing on this host holds (as `ddconsole up` picks). The server a
        switch replaces gives its port back."""
        taken = {s.record.plan.port for s in self._busy(replacing)}
        given_back = {s.record.plan.port for s in self._statuses() if s.id == replacing}
        if preferred not in taken and (preferred in given_back or port_is_free(preferred, host)):
            return None
        return next_free_port(preferred + 1, host, taken=taken)

    def flag_check(self, plan: Plan) -> str:
        args = list(plan.argv[3:])
        if args[-2:] == ["--api-key", REDACTED]:
            args = args[:-2]
        if self.demo:
            from console.sim.plancheck import check_with_simulator

            checked = check_with_simulator({"plan": args})["plan"]
            if checked.ok:
                version = checked.sglang_version
                return f"the simulator's copy of SGLang {version}'s parser takes every flag"
            return "; ".join(f"{p.flag}: {p.message}" for p in checked.problems)
        try:
            result = check_args(plan.argv[0], {"plan": args}, timeout=120)["plan"]
        except FlagCheckUnavailable as exc:
            return f"flag check unavailable: {exc.message}"
        if result.ok:
            return f"SGLang {result.sglang_version} parses every flag"
        return "; ".join(f"{p.flag}: {p.message}" for p in result.problems)

    # -- lifecycle -----------------------------------------------------------------------

    def _with_eta(self, plan: Plan, progress: Progress) -> Progress:
        """`progress` with the time left until ready on each line, where it can be
        estimated (a demo server: the simulator's own load time)."""
        if not self.demo:
            return progress
        from console.tui.sim_speed import sim_cell_speed

        speed = sim_cell_speed(self.catalog, (plan.profile, plan.layout, plan.variant))
        if speed is None:
            return progress
        ready_s = speed.ready_s
        started = time.monotonic()
        progress(f"  ready in about {ready_s:.0f}s (the simulator's load time)")

        def say(line: str) -> None:
            left = ready_s - (time.monotonic() - started)
            progress(f"{line}  (ETA {left:.0f}s)" if left >= 1 else line)

        return say

    def launch(self, plan: Plan, progress: Progress) -> ServerView:
        from console.server import actions

        self._refuse_if_read_only()
        try:
            record = actions.launch(self.manager, plan, on_event=progress)
            self._note(f"launched {record.id} ({plan.profile} {plan.layout} {plan.variant})")
            waiting = self._with_eta(plan, progress)  # counted from the spawn
            status = actions.wait_ready(self.manager, record.id, on_event=waiting)
        except ConsoleError as exc:
            raise ActionRefused(exc.message) from None
        return _outcome(status, progress)

    def stop_server(self, server_id: str, progress: Progress) -> str:
        self._refuse_if_read_only()
        self._refuse_if_not_ours(server_id)
        status = self.manager.status(server_id, probe=False)
        if status.state.terminal and not status.orphans:
            self.manager.forget(server_id)
            self._note(f"forgot {server_id}")
            return f"forgot {server_id} ({status.state.value})"
        report = self.manager.stop(server_id, on_event=lambda e, t: progress(f"{e:5.1f}s {t}"))
        if status.state.terminal:
            self.manager.forget(server_id)
        self._note(report.summary())
        return report.summary()

    def restart(self, server_id: str, progress: Progress) -> ServerView:
        from console.server import actions

        self._refuse_if_read_only()
        self._refuse_if_not_ours(server_id)
        try:
            status = actions.restart(self.manager, server_id, on_event=progress)
        except ConsoleError as exc:
            raise ActionRefused(exc.message) from None
        self._note(f"restarted {server_id}")
        return _outcome(status, progress)

    def switch(self, server_id: str, plan: Plan, progress: Progress) -> ServerView:
        """Stop `server_id` and whatever else holds the plan's GPUs or port, then launch."""
        from console.server import actions

        self._refuse_if_read_only()
        self._refuse_if_not_ours(server_id)
        try:
            victims = actions.in_the_way(self.manager, plan, replacing=server_id)
            progress = self._with_eta(plan, progress)
            status = actions.switch(self.manager, plan, victims=victims, on_event=progress)
        except ConsoleError as exc:
            raise ActionRefused(exc.message) from None
        stopped = ", ".join(v.id for v in victims) or "nothing"
        self._note(f"switched {stopped} -> {status.id} ({plan.layout} {plan.variant})")
        return _outcome(status, progress)

    # -- benchmarks (detached, so they outlive the TUI) ----------------------------------

    def _detach(self, request: RunRequest, name: str) -> str:
        """Create the run from `request` and start its runner detached (the CLI's path)."""
        from console.bench.launch import create_run, detach

        self._refuse_if_read_only()
        try:
            run = create_run(request, runs_root=self.runs_root, name=name, demo=self.demo)
            detach(run)
        except ConsoleError as exc:
            raise ActionRefused(exc.message) from None
        self._note(f"started run {run.run_id}")
        return run.run_id

    def start_bench(self, request: BenchRequest) -> str:
        from console.bench.request import cell_id
        from console.server.actions import ready_server

        self._refuse_if_read_only()
        try:
            request = request.validate()
            if request.server_id is None:
                return self._detach(request, request.run_name(request.url or "url"))
            status = ready_server(self.manager, request.server_id)
        except ConsoleError as exc:
            raise ActionRefused(exc.message) from None
        plan = status.record.plan
        request = dataclasses.replace(request, server_id=status.id)
        if request.slo is None:
            request = dataclasses.replace(request, slo=self._profile_slo(plan.profile))
        return self._detach(
            request, request.run_name(cell_id(plan.profile, plan.layout, plan.variant))
        )

    def _profile_slo(self, profile: str) -> str | None:
        """The profile's default SLO ([bench] slo); None when it has none or is gone."""
        try:
            return self.catalog.get(profile).profile.bench.slo
        except ConsoleError:
            return None

    def start_campaign(self, request: CampaignRequest) -> str:
        self._refuse_if_read_only()
        try:
            request = request.check(self.catalog)
        except ConsoleError as exc:
            raise ActionRefused(exc.message) from None
        return self._detach(request, request.spec.name)

    def demo_campaign(self) -> CampaignRequest:
        """The DDTree budget sweep, placed on a free GPU and port beside what already runs."""
        from console.bench.request import CampaignRequest

        self._refuse_if_read_only()
        path = next((p for p in self.campaigns if p.name == DEMO_CAMPAIGN), None)
        if path is None:
            raise ActionRefused(f"the demo campaign {DEMO_CAMPAIGN} is not installed")
        gpus, port = self._placement()
        try:
            request = CampaignRequest.from_file(path, gpus=gpus, port=port)
        except ConsoleError as exc:
            raise ActionRefused(exc.message) from None
        if self.demo:
            # On the simulator the sweep shows the same acceptance collapse with fewer,
            # shorter requests: about a minute and a half instead of nine.
            spec = request.spec.model_copy(
                update={"requests": DEMO_SWEEP_REQUESTS, "output_len": DEMO_SWEEP_OUTPUT_LEN}
            )
            request = dataclasses.replace(request, spec=spec)
        return request

    def stop_run(self, run_id: str, progress: Progress) -> str:
        """Stop a running run as Ctrl-C does and wait for it (its runner stops the servers
        a campaign launched, which takes a stop's grace period)."""
        from console.bench.cancel import stop_run

        self._refuse_if_read_only()
        if not run_id or run_id in (".", "..") or "/" in run_id:
            raise ActionRefused(f"no run {run_id!r}")
        progress(f"stopping run {run_id}…")
        try:
            message = stop_run(self.runs_root / run_id, timeout_s=STOP_RUN_TIMEOUT_S)
        except ConsoleError as exc:
            raise ActionRefused(exc.message) from None
        self._note(message)
        return message

    def _placement(self) -> tuple[tuple[int, ...], int]:
        """The last free GPU and the first free port from 30100: where the demo sweep runs."""
        held = {g for s in self._busy() for g in s.record.plan.gpus}
        free = [g.index for g in self.topology.gpus if g.index not in held]
        if not free:
            raise ActionRefused("every GPU is held by a server; stop one first")
        taken = {s.record.plan.port for s in self._busy()}
        port = 30100
        while port in taken or not port_is_free(port):
            port += 1
        return (free[-1],), port
