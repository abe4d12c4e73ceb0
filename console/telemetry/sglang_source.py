"""One SGLang server's telemetry over HTTP: /metrics every tick, /server_info now and then.

Live decode tok/s is the rate of `sglang:realtime_tokens_total{mode="decode"}` (it moves every
step); finished-request tok/s the rate of `generation_tokens_total`. Latency percentiles come
from histogram bucket deltas over a sliding window, buckets merged across DP ranks, each with
the bucket it falls in; before a second bucket read exists they cover every request since the
server started (`latency_scope`). A server
that reports a simulator speed in /server_info has its rates put back on its own clock.
Only the metrics used are parsed, each series' labels once (`SeriesCache`), and latency
buckets only every few ticks: parsing is most of what watching a server costs.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import httpx

from console.core.auth import bearer
from console.core.http import (
    JSON_MAX_BYTES,
    METRICS_MAX_BYTES,
    BodyTooLarge,
    DeadlineExceeded,
    connection_refused,
    get_capped,
)
from console.telemetry.derive import counter_rate, histogram_delta
from console.telemetry.dp_ranks import decode_counters, rank_figures
from console.telemetry.keys import SourceId
from console.telemetry.prometheus import (
    Histogram,
    MetricsParseError,
    MetricsSnapshot,
    SeriesCache,
    finite,
    metric_names,
    non_finite_names,
)
from console.telemetry.quantile import Quantile, histogram_quantile
from console.telemetry.samples import ServerSample, SourceState, SourceStatus
from console.telemetry.source import PollResult

WATCHED_GAUGES = (
    "sglang:gen_throughput",
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:token_usage",
    "sglang:spec_accept_length",
    "sglang:spec_accept_rate",
)
COUNTERS = (
    "sglang:realtime_tokens_total",
    "sglang:generation_tokens_total",
    "sglang:num_requests_total",
    "sglang:spec_verify_calls_total",
)
HISTOGRAMS = {
    "ttft": "sglang:time_to_first_token_seconds",
    "itl": "sglang:inter_token_latency_seconds",
    "e2e": "sglang:e2e_request_latency_seconds",
}
CORE_NAMES = metric_names((*WATCHED_GAUGES, *COUNTERS), ())
ALL_NAMES = metric_names((*WATCHED_GAUGES, *COUNTERS), HISTOGRAMS.values())
# Latency windows span ten seconds; their buckets are read every this many ticks (like
# SGLang's own Grafana dashboard, which refreshes every 5 s).
HISTOGRAM_EVERY = 5
NO_METRICS_ROUTE = "no /metrics (start SGLang with --enable-metrics)"
NO_SERIES_YET = "no sglang: series yet (they appear with the first request)"


@dataclass(frozen=True)
class _Point:
    t: float
    decode: float | None
    generation: float | None
    requests: float | None
    verify: float | None
    rank_decode: dict[int, float] = field(default_factory=dict)
    """Each DP rank's decode-token counter (empty without DP ranks)."""


def time_scale(server_info: dict[str, Any] | None) -> float:
    """Simulated seconds per real second for a simulator at --sim-speed F, else 1."""
    if not server_info:
        return 1.0
    sim = server_info.get("sim")
    if isinstance(sim, dict):
        speed = sim.get("speed")
        if isinstance(speed, int | float) and speed > 0:
            return float(speed)
    return 1.0


def _finite_values(
    snapshot: MetricsSnapshot, name: str, *, totals_only: bool = False
) -> list[float]:
    """The finite values of a metric's series. With `totals_only`, a series labelled with a
    non-empty `priority` is left out: with --enable-priority-scheduling SGLang publishes the
    total under `priority=""` and the same requests again per priority
    (sglang 0.5.23 srt/observability/metrics_collector.py:1389-1390, 1417-1430)."""
    if totals_only:
        values = [
            value for labels, value in snapshot.samples.get(name, ()) if not labels.get("priority")
        ]
    else:
        values = snapshot.values(name)
    return [v for v in values if not (math.isnan(v) or math.isinf(v))]


class SglangSource:
    _instances = 0
    """Sources created so far: staggers their bucket reads so ticks share the cost."""

    def __init__(
        self,
        server_id: str,
        url: str,
        client: httpx.AsyncClient,
        *,
        interval_s: float = 1.0,
        window_s: float = 10.0,
        info_every: int = 10,
        api_key: str | None = None,
        histogram_every: int = HISTOGRAM_EVERY,
    ) -> None:
        """`histogram_every`: read latency buckets every this many ticks (and on the first);
        0 reads them on the first tick only (a one-shot reading: since server start)."""
        self.server_id = server_id
        self.name = SourceId.server(server_id)
        self.url = url.rstrip("/")
        self.client = client
        self.interval_s = interval_s
        self.window_s = window_s
        self.info_every = max(1, info_every)
        self.headers = bearer(api_key)
        self.server_info: dict[str, Any] | None = None
        self.scale = 1.0
        self.histogram_every = max(0, histogram_every)
        self._ticks = 0
        self._offset = SglangSource._instances % max(1, self.histogram_every)
        SglangSource._instances += 1
        self._previous: _Point | None = None
        self._windows: deque[tuple[float, dict[str, Histogram | None]]] = deque(
            maxlen=max(3, int(window_s / (interval_s * max(1, self.histogram_every))) + 3)
        )
        self._percentiles: dict[str, Quantile | None] = {}
        self._scope: str | None = None
        self._window_span_s: float | None = None
        self._last_ok: float | None = None
        self._series = SeriesCache()

    @property
    def speculative(self) -> bool | None:
        """True/False from /server_info's `speculative_algorithm` (null when off); None when
        unknown: no /server_info yet, or one without the key."""
        if self.server_info is None or "speculative_algorithm" not in self.server_info:
            return None
        return bool(self.server_info.get("speculative_algorithm"))

    async def _fetch_info(self) -> None:
        try:
            response = await get_capped(
                self.client,
                f"{self.url}/server_info",
                headers=self.headers,
                deadline_s=min(2.0, self.interval_s * 2),
                max_bytes=JSON_MAX_BYTES,
            )
            if response.status_code == 200:
                data = response.json()
                if isinstance(data, dict):
                    self.server_info = data
                    self.scale = time_scale(data)
        except (httpx.HTTPError, ValueError):
            pass

    def _status(
        self, state: SourceState, reason: str | None, now: float | None = None
    ) -> SourceStatus:
        return SourceStatus(
            name=self.name, state=state, reason=reason, last_ok_mono=now or self._last_ok
        )

    async def poll(self, now: float) -> PollResult:
        tick = self._ticks
        self._ticks += 1
        if self.server_info is None or tick % self.info_every == 0:
            await self._fetch_info()
        timeout = max(0.2, self.interval_s * 0.8)
        try:
            response = await get_capped(
                self.client,
                f"{self.url}/metrics",
                deadline_s=timeout,
                max_bytes=METRICS_MAX_BYTES,
            )
        except BodyTooLarge as exc:
            return PollResult(statuses=[self._status(SourceState.UNAVAILABLE, str(exc))])
        except DeadlineExceeded:
            return PollResult(
                statuses=[self._status(SourceState.STALE, f"no answer within {timeout:.1f} s")]
            )
        except httpx.HTTPError as exc:
            if connection_refused(exc):
                return PollResult(
                    statuses=[self._status(SourceState.UNAVAILABLE, "connection refused")]
                )
            if not isinstance(exc, httpx.TimeoutException):
                return PollResult(
                    statuses=[self._status(SourceState.UNAVAILABLE, f"{type(exc).__name__}: {exc}")]
                )
            return PollResult(
                statuses=[self._status(SourceState.STALE, f"no answer within {timeout:.1f} s")]
            )
        if response.status_code == 404:
            # No /metrics route at all: SGLang mounts it only with --enable-metrics
            # (sglang 0.5.23 srt/entrypoints/http_server.py:313-316).
            return PollResult(statuses=[self._status(SourceState.UNAVAILABLE, NO_METRICS_ROUTE)])
        if response.status_code != 200:
            return PollResult(
                statuses=[
                    self._status(
                        SourceState.UNAVAILABLE, f"HTTP {response.status_code} from /metrics"
                    )
                ]
            )
        with_histograms = tick == 0 or (
            self.histogram_every > 0 and (tick + self._offset) % self.histogram_every == 0
        )
        try:
            snapshot = self._series.parse(
                response.text, ALL_NAMES if with_histograms else CORE_NAMES
            )
        except MetricsParseError as exc:
            return PollResult(
                statuses=[self._status(SourceState.UNAVAILABLE, f"bad /metrics: {exc}")]
            )
        self._last_ok = now
        if with_histograms:
            self._update_percentiles(snapshot, now)
        sample = self._sample(snapshot, now)
        bad = non_finite_names(snapshot, WATCHED_GAUGES)
        if not snapshot.samples:
            # SGLang creates a series at its first use: a server that has served nothing
            # yet (warming up, or --skip-server-warmup) shows none of these.
            status = self._status(SourceState.DEGRADED, NO_SERIES_YET, now)
        elif bad:
            status = self._status(
                SourceState.DEGRADED, f"NaN/Inf in {', '.join(bad)} (shown as -)", now
            )
        else:
            status = self._status(SourceState.OK, None, now)
        return PollResult([sample], [status])

    def _sample(self, snapshot: MetricsSnapshot, now: float) -> ServerSample:
        point = _Point(
            t=now,
            decode=snapshot.total("sglang:realtime_tokens_total", mode="decode"),
            generation=snapshot.total("sglang:generation_tokens_total"),
            requests=snapshot.total("sglang:num_requests_total"),
            verify=snapshot.total("sglang:spec_verify_calls_total"),
            rank_decode=decode_counters(snapshot),
        )
        previous, self._previous = self._previous, point
        seconds = (now - previous.t) * self.scale if previous else 0.0

        def rate(field: str) -> float | None:
            if previous is None:
                return None
            return finite(counter_rate(getattr(previous, field), getattr(point, field), seconds))

        def gauge_sum(name: str) -> float | None:
            values = _finite_values(snapshot, name, totals_only=True)
            return math.fsum(values) if values else None

        def gauge_mean(name: str) -> float | None:
            values = _finite_values(snapshot, name, totals_only=True)
            return math.fsum(values) / len(values) if values else None

        def gauge_max(name: str) -> float | None:
            values = _finite_values(snapshot, name, totals_only=True)
            return max(values) if values else None

        accept_length = gauge_mean("sglang:spec_accept_length")
        accept_rate = gauge_mean("sglang:spec_accept_rate")
        if self.speculative is False or not accept_length:
            # 0 means speculative decoding is off, or no decode tick has reported yet.
            accept_length = accept_rate = None
        pct = self._percentiles

        def value(key: str) -> float | None:
            found = pct.get(key)
            return None if found is None else found.value_s

        bounds = tuple(
            (f"{key}_s", found.lower_s, found.upper_s)
            for key, found in pct.items()
            if found is not None
        )
        return ServerSample(
            t_mono=now,
            source=self.name,
            server_id=self.server_id,
            decode_tok_s=rate("decode"),
            finished_tok_s=rate("generation"),
            requests_s=rate("requests"),
            gen_throughput=gauge_sum("sglang:gen_throughput"),
            running=gauge_sum("sglang:num_running_reqs"),
            queued=gauge_sum("sglang:num_queue_reqs"),
            token_usage=gauge_max("sglang:token_usage"),
            accept_length=accept_length,
            accept_rate=accept_rate,
            ttft_p50_s=value("ttft_p50"),
            ttft_p99_s=value("ttft_p99"),
            itl_p50_s=value("itl_p50"),
            itl_p99_s=value("itl_p99"),
            e2e_p50_s=value("e2e_p50"),
            e2e_p99_s=value("e2e_p99"),
            spec_verify_s=rate("verify"),
            latency_scope=self._scope,
            latency_window_s=self._window_span_s,
            latency_bounds=bounds,
            dp_ranks=rank_figures(
                snapshot,
                point.rank_decode,
                previous.rank_decode if previous else None,
                seconds,
                speculative=self.speculative,
            ),
        )

    def _update_percentiles(self, snapshot: MetricsSnapshot, now: float) -> None:
        """p50/p99 over the last `window_s` from bucket deltas (held between bucket reads);
        on the first read, over everything since the server started."""
        current = {key: snapshot.histogram(name) for key, name in HISTOGRAMS.items()}
        self._windows.append((now, current))
        oldest_t, oldest = next(
            ((t, h) for t, h in self._windows if now - t <= self.window_s + 1e-6),
            (now, current),
        )
        percentiles: dict[str, Quantile | None] = {}
        since_start = oldest_t == now
        for key in HISTOGRAMS:
            if since_start:
                observed = current.get(key)
            else:
                observed = histogram_delta(oldest.get(key), current.get(key))
            percentiles[f"{key}_p50"] = histogram_quantile(0.5, observed)
            percentiles[f"{key}_p99"] = histogram_quantile(0.99, observed)
        self._percentiles = percentiles
        self._scope = "since_start" if since_start else "window"
        self._window_span_s = None if since_start else now - oldest_t

    async def close(self) -> None:
        return None
