"""Replicas' telemetry through SGLang's model gateway: one `/engine_metrics` read per tick.

The gateway (`smg`) re-exposes every worker's `/metrics` on `/engine_metrics`, each series
labelled `worker_addr` with the worker's URL. This source splits one such read by worker
and turns each worker's series into that replica's `ServerSample`, with the same rates,
gauges and latency windows as reading the replica directly (console.telemetry.
sglang_source), so a gateway's replicas cost one request a tick instead of one each.
"""

from __future__ import annotations

import httpx

from console.core.http import (
    METRICS_MAX_BYTES,
    BodyTooLarge,
    DeadlineExceeded,
    connection_refused,
    get_capped,
)
from console.telemetry.keys import SourceId
from console.telemetry.prometheus import MetricsParseError, MetricsSnapshot, parse
from console.telemetry.samples import ServerSample, SourceState, SourceStatus
from console.telemetry.sglang_source import ALL_NAMES, CORE_NAMES, HISTOGRAM_EVERY, SglangSource
from console.telemetry.source import PollResult

WORKER_LABEL = "worker_addr"
NO_ENGINE_METRICS = "no /engine_metrics (not SGLang's model gateway?)"


def split_by_worker(snapshot: MetricsSnapshot) -> dict[str, MetricsSnapshot]:
    """One snapshot per `worker_addr`, each series without that label (as the worker's own
    /metrics has it)."""
    workers: dict[str, MetricsSnapshot] = {}
    for name, series in snapshot.samples.items():
        for labels, value in series:
            worker = labels.get(WORKER_LABEL)
            if worker is None:
                continue
            own = {k: v for k, v in labels.items() if k != WORKER_LABEL}
            workers.setdefault(worker, MetricsSnapshot()).samples.setdefault(name, []).append(
                (own, value)
            )
    return workers


class _WorkerView(SglangSource):
    """One worker's figures from the gateway's series: SglangSource's arithmetic, fed
    snapshots instead of reading the worker."""

    def figures(self, snapshot: MetricsSnapshot, now: float, histograms: bool) -> ServerSample:
        if histograms:
            self._update_percentiles(snapshot, now)
        return self._sample(snapshot, now)


class GatewaySource:
    """The gateway's `/engine_metrics` as each replica's samples. `workers` names the
    replicas: worker URL -> server id; a worker it does not name is named by its URL."""

    def __init__(
        self,
        gateway_id: str,
        url: str,
        client: httpx.AsyncClient,
        workers: dict[str, str],
        *,
        interval_s: float = 1.0,
        window_s: float = 10.0,
        histogram_every: int = HISTOGRAM_EVERY,
    ) -> None:
        self.name = SourceId.server(gateway_id)
        self.url = url.rstrip("/")
        self.client = client
        self.interval_s = interval_s
        self.window_s = window_s
        self.histogram_every = max(0, histogram_every)
        self.workers = {k.rstrip("/"): v for k, v in workers.items()}
        self._views: dict[str, _WorkerView] = {}
        self._ticks = 0
        self._last_ok: float | None = None

    def _view(self, worker_url: str) -> _WorkerView:
        view = self._views.get(worker_url)
        if view is None:
            server_id = self.workers.get(worker_url.rstrip("/"))
            name = server_id or SourceId.url(worker_url).name
            view = _WorkerView(
                name,
                worker_url,
                self.client,
                interval_s=self.interval_s,
                window_s=self.window_s,
                histogram_every=self.histogram_every,
            )
            self._views[worker_url] = view
        return view

    def _status(self, state: SourceState, reason: str | None) -> SourceStatus:
        return SourceStatus(name=self.name, state=state, reason=reason, last_ok_mono=self._last_ok)

    async def poll(self, now: float) -> PollResult:
        tick = self._ticks
        self._ticks += 1
        timeout = max(0.2, self.interval_s * 0.8)
        try:
            response = await get_capped(
                self.client,
                f"{self.url}/engine_metrics",
                deadline_s=timeout,
                max_bytes=METRICS_MAX_BYTES,
            )
        except BodyTooLarge as exc:
            return PollResult(statuses=[self._status(SourceState.UNAVAILABLE, str(exc))])
        except DeadlineExceeded:
            reason = f"no answer within {timeout:.1f} s"
            return PollResult(statuses=[self._status(SourceState.STALE, reason)])
        except httpx.HTTPError as exc:
            if connection_refused(exc):
                reason = "connection refused"
                return PollResult(statuses=[self._status(SourceState.UNAVAILABLE, reason)])
            reason = f"{type(exc).__name__}: {exc}"
            return PollResult(statuses=[self._status(SourceState.UNAVAILABLE, reason)])
        if response.status_code == 404:
            return PollResult(statuses=[self._status(SourceState.UNAVAILABLE, NO_ENGINE_METRICS)])
        if response.status_code != 200:
            reason = f"HTTP {response.status_code} from /engine_metrics"
            return PollResult(statuses=[self._status(SourceState.UNAVAILABLE, reason)])
        histograms = tick == 0 or (self.histogram_every > 0 and tick % self.histogram_every == 0)
        try:
            snapshot = parse(response.text, ALL_NAMES if histograms else CORE_NAMES)
        except MetricsParseError as exc:
            reason = f"bad /engine_metrics: {exc}"
            return PollResult(statuses=[self._status(SourceState.UNAVAILABLE, reason)])
        self._last_ok = now
        by_worker = split_by_worker(snapshot)
        samples = [
            self._view(worker).figures(own, now, histograms)
            for worker, own in sorted(by_worker.items())
        ]
        if not samples:
            status = self._status(SourceState.DEGRADED, "no worker series yet")
        else:
            status = self._status(SourceState.OK, None)
        # Each worker read is its replica's source status too (read through the gateway).
        workers = [
            SourceStatus(
                name=self._views[w].name, state=SourceState.OK, reason=None, last_ok_mono=now
            )
            for w in sorted(by_worker)
        ]
        return PollResult(list(samples), [status, *workers])

    async def close(self) -> None:
        return None
