"""The one place a telemetry stack is assembled: store, poller, HTTP client and sources.

The console's monitor (TUI, `metrics`, `snapshot`, `record`) and a benchmark's run recorder
each hold a hub instead of wiring their own, so a source is built one way everywhere: GPUs
with their NUMA placement, the host with each server's binding, the console's own cost, and
one SGLang source per tracked server, all sharing one HTTP client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import httpx

from console.hw.backend import GpuBackend
from console.telemetry.cost_source import CostSource
from console.telemetry.gateway_source import GatewaySource
from console.telemetry.gpu_source import GpuSource
from console.telemetry.host_source import HostBackend, HostSource, WatchedServer
from console.telemetry.keys import SourceId
from console.telemetry.poller import Poller
from console.telemetry.sglang_source import HISTOGRAM_EVERY, SglangSource
from console.telemetry.source import PollResult
from console.telemetry.store import DEFAULT_CAPACITY, TimeSeriesStore

MAX_CONNECTIONS = 64


def make_client() -> httpx.AsyncClient:
    """The HTTP client SGLang sources share: aiohttp under httpx costs a fraction of
    httpcore's per request on the loop; no proxies from the environment."""
    from httpx_aiohttp import AiohttpTransport

    return httpx.AsyncClient(
        transport=AiohttpTransport(
            trust_env=False, limits=httpx.Limits(max_connections=MAX_CONNECTIONS)
        ),
        trust_env=False,
    )


class TelemetryHub:
    """A store written by one poller. `client`: an HTTP client to share (the caller keeps
    owning it); without one the hub makes its own and closes it in `close`."""

    def __init__(
        self,
        *,
        interval_s: float = 1.0,
        capacity: int = DEFAULT_CAPACITY,
        store: TimeSeriesStore | None = None,
        client: httpx.AsyncClient | None = None,
        histogram_every: int = HISTOGRAM_EVERY,
    ) -> None:
        """`histogram_every`: how often SGLang sources read latency buckets, in ticks (0:
        on their first tick only, for one-shot readings)."""
        self.interval_s = interval_s
        self.histogram_every = histogram_every
        self.store = store if store is not None else TimeSeriesStore(capacity)
        self.poller = Poller(self.store)
        self._own_client = client is None
        self.client = client if client is not None else make_client()
        self.gpu_source: GpuSource | None = None

    # -- sources -------------------------------------------------------------------------

    def add_gpus(
        self, backend: GpuBackend, numa_nodes: dict[int, int | None] | None = None
    ) -> GpuSource:
        """Every GPU the backend sees, in one source (its calls run on its own thread)."""
        if self.gpu_source is None:
            self.gpu_source = GpuSource(backend, interval_s=self.interval_s, numa_nodes=numa_nodes)
            self.poller.add(self.gpu_source)
        return self.gpu_source

    def add_host(
        self, backend: HostBackend, servers: Callable[[], list[WatchedServer]] | None = None
    ) -> None:
        self.poller.add(HostSource(backend, interval_s=self.interval_s, servers=servers))

    def add_cost(self) -> None:
        """The console's own CPU share and each source's poll time."""
        self.poller.add(
            CostSource(lambda: dict(self.poller.poll_seconds), interval_s=self.interval_s)
        )

    def track(self, source: SourceId, url: str, *, api_key: str | None = None) -> None:
        """Poll the SGLang server at `url` as `source` (a `server` id); no-op if tracked."""
        if source.kind != "server":
            raise ValueError(f"{source} is not a server source")
        if source not in self.poller.sources:
            self.poller.add(
                SglangSource(
                    source.name,
                    url,
                    self.client,
                    interval_s=self.interval_s,
                    api_key=api_key,
                    histogram_every=self.histogram_every,
                )
            )

    def track_gateway(self, source: SourceId, url: str, workers: dict[str, str]) -> None:
        """Poll SGLang's model gateway at `url` as `source`: its /engine_metrics split into
        each worker's samples, named by `workers` (URL -> server id); no-op if tracked."""
        if source not in self.poller.sources:
            self.poller.add(
                GatewaySource(
                    source.name,
                    url,
                    self.client,
                    workers,
                    interval_s=self.interval_s,
                    histogram_every=self.histogram_every,
                )
            )

    async def untrack(self, source: SourceId) -> None:
        await self.poller.remove(source)

    def tracked(self) -> list[SourceId]:
        """The server sources polled now."""
        return [name for name in self.poller.sources if name.kind == "server"]

    def listen(self, listener: Callable[[float, PollResult], None]) -> None:
        """Call `listener` with every poll's result as the store takes it (recordings)."""
        self.poller.listeners.append(listener)

    def unlisten(self, listener: Callable[[float, PollResult], None]) -> None:
        if listener in self.poller.listeners:
            self.poller.listeners.remove(listener)

    # -- running -------------------------------------------------------------------------

    def start(self) -> None:
        """Poll every source on its own interval (sources added later start at once)."""
        self.poller.start()

    async def poll_all_once(self) -> None:
        await self.poller.poll_all_once()

    async def close(self) -> None:
        """Stop polling, close every source, and the HTTP client if the hub made it."""
        await self.poller.stop()
        if self._own_client:
            await self.client.aclose()


def watch_urls(hub: TelemetryHub, urls: Iterable[str]) -> list[SourceId]:
    """Track SGLang servers given by URL alone (`metrics --url`); their ids."""
    ids = []
    for url in urls:
        source = SourceId.url(url)
        hub.track(source, url)
        ids.append(source)
    return ids
