"""Live monitoring of a host and its servers: the watcher plus the telemetry poller.

Keeps one SGLang source per live managed server (added and removed as servers come and go)
and any extra URLs, a GPU source, a host source (with each server's real NUMA binding) and
the console's own cost. The TUI, `ddconsole metrics` and snapshots all run this.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from urllib.parse import urlparse

import httpx
from httpx_aiohttp import AiohttpTransport

from console.hw.backend import GpuBackend
from console.server.manager import ServerManager
from console.server.watch import ServerWatcher, StateChange
from console.telemetry.blocking import BlockingCaller, Stalled
from console.telemetry.cost_source import CostSource
from console.telemetry.gpu_source import GpuSource
from console.telemetry.host_source import HostBackend, HostSource, WatchedServer
from console.telemetry.poller import Poller
from console.telemetry.sglang_source import SglangSource
from console.telemetry.store import DEFAULT_CAPACITY, TimeSeriesStore
from console.topology.model import Topology


def url_source_id(url: str) -> str:
    parsed = urlparse(url)
    return f"{parsed.hostname or 'host'}:{parsed.port or 80}"


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
        store: TimeSeriesStore | None = None,
    ) -> None:
        self.manager = manager
        self.interval_s = interval_s
        self.store = store if store is not None else TimeSeriesStore(capacity)
        self.poller = Poller(self.store)
        self.sync_interval_s = sync_interval_s
        # /ready about once a second whatever the sync cadence.
        probe_every = max(1, round(1.0 / sync_interval_s))
        self.watcher = (
            ServerWatcher(manager, probe_every=probe_every) if manager is not None else None
        )
        # aiohttp under httpx: a fraction of httpcore's per-request cost on the loop.
        self.client = httpx.AsyncClient(
            transport=AiohttpTransport(trust_env=False, limits=httpx.Limits(max_connections=64)),
            trust_env=False,
        )
        self._servers_caller = BlockingCaller("servers", max(0.5, interval_s * 2))
        self.changes: list[StateChange] = []
        self.change_count = 0
        """Every state change seen so far (the list above keeps only the recent ones)."""
        numa = {gpu.index: gpu.numa_node for gpu in topology.gpus}
        if watch_gpus:
            self.poller.add(GpuSource(gpu_backend, interval_s=interval_s, numa_nodes=numa))
        self.poller.add(
            HostSource(host_backend, interval_s=interval_s, servers=self.watched_servers)
        )
        self.poller.add(CostSource(lambda: dict(self.poller.poll_seconds), interval_s=interval_s))
        for url in urls:
            self.poller.add(
                SglangSource(url_source_id(url), url, self.client, interval_s=interval_s)
            )
        self._task: asyncio.Task[None] | None = None

    def watched_servers(self) -> list[WatchedServer]:
        if self.watcher is None:
            return []
        return [
            WatchedServer(s.id, s.pid, s.record.plan.numa_nodes)
            for s in self.watcher.current
            if s.pid is not None and not s.state.terminal
        ]

    async def sync_servers(self) -> list[StateChange]:
        """Poll the watcher (blocking work, off the loop) and keep one source per live server."""
        if self.watcher is None or self.manager is None:
            return []
        watcher = self.watcher
        try:
            changes = await self._servers_caller.call(watcher.poll)
        except Stalled:
            return []
        live = {s.id: s for s in watcher.current if not s.state.terminal and s.pid is not None}
        for server_id, status in live.items():
            name = f"server:{server_id}"
            if name not in self.poller.sources:
                plan = status.record.plan
                key = os.environ.get(plan.api_key_env) if plan.api_key_env else None
                self.poller.add(
                    SglangSource(
                        server_id,
                        status.record.url,
                        self.client,
                        interval_s=self.interval_s,
                        api_key=key,
                    )
                )
        for name in list(self.poller.sources):
            if (
                name.startswith("server:")
                and name[len("server:") :] not in live
                and not _is_url_source(name)
            ):
                await self.poller.remove(name)
        self.changes = (self.changes + changes)[-200:]
        self.change_count += len(changes)
        return changes

    async def _sync_loop(self) -> None:
        while True:
            await self.sync_servers()
            await asyncio.sleep(self.sync_interval_s)

    async def start(self) -> None:
        await self.sync_servers()
        self.poller.start()
        self._task = asyncio.create_task(self._sync_loop())

    async def once(self) -> None:
        """A complete reading: a first sample, then a second one an interval later."""
        await self.sync_servers()
        await self.poller.poll_all_once()
        await asyncio.sleep(self.interval_s)
        await self.sync_servers()
        await self.poller.poll_all_once()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self.poller.stop()
        self._servers_caller.close()
        await self.client.aclose()
        if self.manager is not None:
            self.manager.close()


def _is_url_source(name: str) -> bool:
    """URL sources are named host:port; managed ones by their server id."""
    tail = name[len("server:") :]
    host, _, port = tail.rpartition(":")
    return bool(host) and port.isdigit()


def reading(monitor: Monitor) -> dict[str, object]:
    """Everything the store holds now, as plain JSON-able data (metrics --json, snapshots)."""
    from dataclasses import asdict

    from console.telemetry.samples import CostSample, GpuSample, HostSample, ServerSample

    store = monitor.store
    latest = store.latest_all()
    statuses = store.statuses()
    gpus = []
    for sample in sorted(
        (s for s in latest.values() if isinstance(s, GpuSample)), key=lambda s: s.index
    ):
        data = asdict(sample)
        data.pop("source")
        status = statuses.get(sample.source)
        data["state"] = status.state.value if status else None
        data["reason"] = status.reason if status else None
        gpus.append(data)
    for name, status in sorted(statuses.items()):
        if name.startswith("gpu:") and all(g["index"] != int(name[4:]) for g in gpus):
            gpus.append(
                {"index": int(name[4:]), "state": status.state.value, "reason": status.reason}
            )
    host = latest.get("host")
    host_json = None
    if isinstance(host, HostSample):
        host_json = {
            "cpu_pct": host.cpu_pct,
            "mem_used_bytes": host.mem_used_bytes,
            "mem_total_bytes": host.mem_total_bytes,
            "load": [host.load1, host.load5, host.load15],
            "numa_nodes": [
                {
                    "node": n.node,
                    "cpu_pct": n.cpu_pct,
                    "cpus": n.cpus,
                    "gpus": sorted(g["index"] for g in gpus if g.get("numa_node") == n.node),
                }
                for n in host.numa
            ],
            "bindings": [
                {
                    "server_id": b.server_id,
                    "intended_nodes": list(b.intended_nodes),
                    "actual_nodes": list(b.actual_nodes),
                    "actual_cpus": b.actual_cpus,
                    "processes": b.processes,
                    "matches": b.matches,
                }
                for b in host.bindings
            ],
        }
    lifecycle = {s.id: s for s in monitor.watcher.current} if monitor.watcher else {}
    servers = []
    for name, status in sorted(statuses.items()):
        if not name.startswith("server:"):
            continue
        server_id = name[len("server:") :]
        server_sample = latest.get(name)
        entry: dict[str, object] = {"id": server_id, "metrics_source": status.to_json()}
        life = lifecycle.get(server_id)
        if life is not None:
            entry.update(
                {
                    "state": life.state.value,
                    "url": life.record.url,
                    "profile": life.record.plan.profile,
                    "layout": life.record.plan.layout,
                    "variant": life.record.plan.variant,
                    "gpus": list(life.record.plan.gpus),
                }
            )
        if isinstance(server_sample, ServerSample):
            entry.update(
                {
                    "tok_s": server_sample.decode_tok_s,
                    "finished_tok_s": server_sample.finished_tok_s,
                    "requests_s": server_sample.requests_s,
                    "gen_throughput": server_sample.gen_throughput,
                    "running": server_sample.running,
                    "queued": server_sample.queued,
                    "token_usage": server_sample.token_usage,
                    "accept_length": server_sample.accept_length,
                    "accept_rate": server_sample.accept_rate,
                    "ttft_p50_s": server_sample.ttft_p50_s,
                    "ttft_p99_s": server_sample.ttft_p99_s,
                    "itl_p50_s": server_sample.itl_p50_s,
                    "itl_p99_s": server_sample.itl_p99_s,
                    "e2e_p50_s": server_sample.e2e_p50_s,
                    "e2e_p99_s": server_sample.e2e_p99_s,
                }
            )
        servers.append(entry)
    cost = latest.get("console")
    return {
        "gpus": gpus,
        "host": host_json,
        "servers": servers,
        "console": {
            "cpu_pct": cost.cpu_pct,
            "rss_bytes": cost.rss_bytes,
            "poll_ms": dict(cost.poll_ms),
        }
        if isinstance(cost, CostSample)
        else None,
        "sources": [s.to_json() for _, s in sorted(statuses.items())],
    }
