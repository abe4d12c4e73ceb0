"""Live monitoring of a host and its servers: the watcher kept in step with a telemetry hub.

Keeps one SGLang source per live managed server and per SGLang server found on the host that
ddconsole did not start (added and removed as servers come and go) and any extra URLs, a GPU
source, a host source (with each server's real NUMA binding) and the console's own cost.
The TUI, `ddconsole metrics` and snapshots all run this.

Managed servers are polled every `sync_interval_s` on the `servers` executor; the host scan
for external servers runs every EXTERNAL_EVERY_S on an executor of its own, with the GPUs'
compute processes read on the GPU source's NVML executor, so neither a slow /proc pass nor a
hung external server delays a managed server's state change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from console.core.auth import env_key
from console.hw.backend import GpuBackend
from console.server.external import ExternalScanner
from console.server.gateway import gateway_workers
from console.server.manager import ServerManager
from console.server.watch import ServerWatcher, StateChange
from console.telemetry.blocking import BlockingCaller, Stalled
from console.telemetry.host_source import HostBackend, WatchedServer
from console.telemetry.hub import TelemetryHub, watch_urls
from console.telemetry.keys import SourceId
from console.telemetry.sglang_source import HISTOGRAM_EVERY
from console.telemetry.store import DEFAULT_CAPACITY, TimeSeriesStore
from console.topology.model import Topology

EXTERNAL_EVERY_S = 5.0
"""How often the host is scanned for external servers (a new one lists this late at most)."""
EXTERNAL_TIMEOUT_S = 4.0
"""A scan still running after this is skipped until it ends (the last list stays)."""


class MonitorFactory(Protocol):
    """What builds a monitor for a front end that holds its own manager and store (the
    TUI's live backend): `Services.monitor`, the one composition root."""

    def __call__(
        self,
        *,
        manager: ServerManager,
        store: TimeSeriesStore,
        interval_s: float,
        sync_interval_s: float,
    ) -> Monitor: ...


class Monitor:
    def __init__(
        self,
        manager: ServerManager | None,
        gpu_backend: GpuBackend,
        host_backend: HostBackend,
        topology: Topology,
        *,
        interval_s: float = 1.0,
        urls: Sequence[str] = (),
        capacity: int = DEFAULT_CAPACITY,
        watch_gpus: bool = True,
        sync_interval_s: float = 0.25,
        histogram_every: int = HISTOGRAM_EVERY,
        store: TimeSeriesStore | None = None,
        external: bool | None = None,
        external_scanner: ExternalScanner | None = None,
        direct_servers: bool = True,
    ) -> None:
        """`external`: also watch SGLang servers ddconsole did not start (default: outside
        demo mode; the demo's host is simulated); `external_scanner` replaces the default
        scanner (and implies `external`). `direct_servers` False: managed servers' states
        are watched but their /metrics not read (another source, Prometheus, reports their
        figures under their ids)."""
        self.direct_servers = direct_servers
        self.manager = manager
        self.interval_s = interval_s
        self.hub = TelemetryHub(
            interval_s=interval_s,
            capacity=capacity,
            store=store,
            histogram_every=histogram_every,
        )
        self.store = self.hub.store
        self.poller = self.hub.poller
        self.sync_interval_s = sync_interval_s
        # /ready about once a second whatever the sync cadence.
        probe_every = max(1, round(1.0 / sync_interval_s))
        self.watcher: ServerWatcher | None = None
        if manager is not None:
            scanner = external_scanner
            if scanner is None and (external if external is not None else not manager.demo):
                scanner = ExternalScanner(
                    manager.records, gpu_backend, [gpu.index for gpu in topology.gpus]
                )
            self.watcher = ServerWatcher(manager, probe_every=probe_every, externals=scanner)
        self._servers_caller = BlockingCaller("servers", max(0.5, interval_s * 2))
        self._external_caller = BlockingCaller("external", EXTERNAL_TIMEOUT_S)
        self.external_problem: str | None = None
        """Why the last external scan failed, None when it did not."""
        self._sources_lock = asyncio.Lock()
        self.changes: list[StateChange] = []
        self.change_count = 0
        """Every state change seen so far (the list above keeps only the recent ones)."""
        if watch_gpus:
            self.hub.add_gpus(gpu_backend, {gpu.index: gpu.numa_node for gpu in topology.gpus})
        self.hub.add_host(host_backend, self.watched_servers)
        self.hub.add_cost()
        self._url_sources = set(watch_urls(self.hub, urls))
        """Sources given by URL: kept whatever the watcher finds."""
        self._tasks: list[asyncio.Task[None]] = []

    def watched_servers(self) -> list[WatchedServer]:
        if self.watcher is None:
            return []
        return [
            WatchedServer(s.id, s.pid, s.record.plan.numa_nodes)
            for s in self.watcher.current
            if s.pid is not None and not s.state.terminal
        ]

    async def sync_servers(self) -> list[StateChange]:
        """Poll the managed servers (blocking work, off the loop) and keep one source per live
        server. A poll that outlasts its deadline still reports its changes: they wait in the
        watcher until a later sync takes them."""
        if self.watcher is None or self.manager is None:
            return []
        try:
            await self._servers_caller.call(self.watcher.poll)
        except Stalled:
            pass
        return await self._sync_sources()

    async def sync_externals(self) -> list[StateChange]:
        """Scan the host for external servers on the external executor, with the GPUs'
        compute processes read on the NVML executor; a scan past its deadline is left to
        finish while the last list stays."""
        watcher = self.watcher
        if watcher is None or watcher.externals is None:
            return []
        holders = await self._gpu_holders(watcher.externals)
        try:
            await self._external_caller.call(lambda: watcher.scan_externals(holders))
        except Stalled:
            pass
        return await self._sync_sources()

    async def _gpu_holders(self, scanner: ExternalScanner) -> dict[int, set[int]] | None:
        """GPU index -> compute-process pids through the GPU source's own executor (NVML's
        calls belong there), None when that is busy, stalled or absent (GPUs then stay as
        the last scan found them)."""
        if self.hub.gpu_source is None:
            return None
        try:
            return await self.hub.gpu_source.caller.call(scanner.gpu_holders)
        except Stalled:
            return None

    async def _sync_sources(self) -> list[StateChange]:
        """Take the watcher's new changes; one SGLang source per live managed server and per
        external server whose own port is known."""
        assert self.watcher is not None
        changes = self.watcher.take_changes()
        async with self._sources_lock:
            await self._sync_sources_locked()
        self.changes = (self.changes + changes)[-200:]
        self.change_count += len(changes)
        return changes

    async def _sync_sources_locked(self) -> None:
        assert self.watcher is not None
        # A gang's non-head nodes serve no API (and no /metrics): the head speaks for them.
        live = {
            s.id: s
            for s in self.watcher.current
            if not s.state.terminal and s.pid is not None and not s.record.is_node
        }
        if not self.direct_servers:
            live = {}
        wanted = set(self._url_sources)
        # A gateway's replicas are read through its /engine_metrics, one read for all.
        gateways = gateway_workers(self.watcher.manager, set(live))
        behind = {rid for workers in gateways.values() for rid in workers.values()}
        for server_id, status in live.items():
            source = SourceId.server(server_id)
            if server_id in behind:
                continue
            wanted.add(source)
            if server_id in gateways:
                self.hub.track_gateway(source, status.record.url, gateways[server_id])
                continue
            if source not in self.poller.sources:
                plan = status.record.plan
                key = env_key(plan.api_key_env)
                self.hub.track(source, status.record.url, api_key=key)
        # An external server's /metrics only where its port is known and its own (not held
        # by a managed server, another external or another process).
        for external in self.watcher.external:
            if external.own_url is not None:
                source = SourceId.server(external.id)
                wanted.add(source)
                # /metrics needs no API key (sglang 0.5.23 srt/utils/auth.py:101-105).
                self.hub.track(source, external.own_url)
        for source in self.hub.tracked():
            if source not in wanted:
                await self.hub.untrack(source)

    async def _sync_loop(self) -> None:
        while True:
            await self.sync_servers()
            await asyncio.sleep(self.sync_interval_s)

    async def _external_loop(self) -> None:
        while True:
            try:
                await self.sync_externals()
                self.external_problem = None
            except (OSError, ValueError, RuntimeError) as exc:
                # /proc or a server's answers turned out stranger than expected: the last
                # list stays, the next scan tries again, the managed servers never wait.
                self.external_problem = f"external server scan failed: {exc}"
            await asyncio.sleep(EXTERNAL_EVERY_S)

    async def start(self) -> None:
        await self.sync_servers()
        self.hub.start()
        self._tasks = [asyncio.create_task(self._sync_loop())]
        if self.watcher is not None and self.watcher.externals is not None:
            self._tasks.append(asyncio.create_task(self._external_loop()))

    async def once(self) -> None:
        """A complete reading: a first sample, then a second one an interval later."""
        await self.sync_servers()
        await self.sync_externals()
        await self.hub.poll_all_once()
        await asyncio.sleep(self.interval_s)
        await self.sync_servers()
        await self.hub.poll_all_once()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        await self.hub.close()
        self._servers_caller.close()
        self._external_caller.close()
        if self.watcher is not None:
            self.watcher.close()
        if self.manager is not None:
            self.manager.close()


def reading(monitor: Monitor) -> dict[str, object]:
    """Everything the store holds now, as plain JSON-able data (metrics --json, snapshots)."""
    from console.telemetry.reading import store_reading

    lifecycle = {s.id: s.to_json() for s in monitor.watcher.current} if monitor.watcher else {}
    if monitor.watcher is not None:
        lifecycle.update({e.id: e.to_json() for e in monitor.watcher.external})
    return store_reading(monitor.store, lifecycle)
