"""SGLang servers and GPUs read through a Prometheus server instead of scraped directly.

One source asks Prometheus' HTTP API every tick and answers with the same samples the direct
sources give (`ServerSample` per SGLang scrape target, keyed by its `instance` label, and a
`GpuSample` per exporter GPU), so the store, the dashboard, recordings and snapshots cannot
tell the two apart. Target health from /api/v1/targets decides each server's state: a target
Prometheus cannot scrape is `stale` with Prometheus' own lastError.

Rates are PromQL `rate()` over a stated window (`rate_window_s`: the console's interval, at
least RATE_SCRAPES scrape intervals, so every window holds several scrapes): the counters the
direct source takes deltas of, over a window of the same length; rate() divides the increase
between the first and last scrape in the window by their distance, as the direct source
divides a counter's delta by the time between its two reads. Latency percentiles come from
bucket increases over LATENCY_WINDOW_S, merged over every label but `le`, as the direct
source merges DP ranks. Gauges are read raw and combined in Python exactly as the direct
source combines them (sum, mean or max; per-priority breakdowns left out).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable, Sequence

import httpx

from console.telemetry.dp_ranks import by_rank
from console.telemetry.keys import SourceId
from console.telemetry.prom_api import PrometheusApi, PrometheusError, Series, Target
from console.telemetry.prom_match import ManagedEndpoint, MatcherSet, map_targets, scoped
from console.telemetry.prom_names import GPU_SELECTOR, GpuReading, gpu_readings
from console.telemetry.prometheus import Histogram, MetricsSnapshot
from console.telemetry.quantile import Quantile, histogram_quantile
from console.telemetry.samples import (
    GpuSample,
    RankFigures,
    ServerSample,
    SourceState,
    SourceStatus,
)
from console.telemetry.sglang_source import HISTOGRAMS, WATCHED_GAUGES
from console.telemetry.source import PollResult
from console.telemetry.store import TimeSeriesStore

RATE_SCRAPES = 4
"""A rate window spans at least this many scrape intervals."""
LATENCY_WINDOW_S = 10.0
"""Latency percentiles cover this long (the direct source's window)."""
DEFAULT_SCRAPE_INTERVAL_S = 15.0
"""Assumed when /api/v1/targets does not say (Prometheus' shipped prometheus.yml sets 15s)."""
HISTORY_S = 3600
"""An instance whose SGLang series vanished within this long is still listed (stale)."""
GPU_PRESENCE = "DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_USED|gpu_utilization_Percentage"
"""Series whose presence makes an (instance, index) a GPU."""
SOURCE_NAME = SourceId("console", "prometheus")
"""The poller's key for this source; it reports under the servers' and GPUs' own ids."""

COUNTER_RATES = {
    "decode": 'sglang:realtime_tokens_total{mode="decode"}',
    "generation": "sglang:generation_tokens_total",
    "requests": "sglang:num_requests_total",
    "verify": "sglang:spec_verify_calls_total",
}
SERVER_SIGNS = "sglang:num_running_reqs|sglang:realtime_tokens_total|sglang:gen_throughput"
"""Series whose presence makes an instance an SGLang server."""


def promql_duration(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def gauges_query(matchers: MatcherSet | None = None) -> str:
    return scoped('{__name__=~"' + "|".join(WATCHED_GAUGES) + '"}', matchers)


def rate_query(selector: str, window_s: float, by: str = "instance") -> str:
    return f"sum by ({by}) (rate({selector}[{promql_duration(window_s)}]))"


def bucket_query(histogram: str, window_s: float, matchers: MatcherSet | None = None) -> str:
    selector = scoped(f"{histogram}_bucket", matchers)
    return f"sum by (instance, le) (increase({selector}[{promql_duration(window_s)}]))"


def gpu_history_query(matchers: MatcherSet | None = None) -> str:
    """Every GPU an exporter reported within HISTORY_S, by instance and index label."""
    selector = scoped('{__name__=~"' + GPU_PRESENCE + '"}', matchers)
    return f"group by (instance, gpu, index) (last_over_time({selector}[{HISTORY_S}s]))"


def history_query(matchers: MatcherSet | None = None) -> str:
    selector = scoped('{__name__=~"' + SERVER_SIGNS + '"}', matchers)
    return f"group by (instance) (last_over_time({selector}[{HISTORY_S}s]))"


def target_state(target: Target | None, has_series: bool) -> tuple[SourceState, str | None]:
    """A server's state from its scrape target's health and whether its series are there
    now: down is stale with Prometheus' lastError; not yet scraped, or scraped with no
    SGLang series yet, is degraded."""
    if target is not None and target.health == "down":
        error = target.last_error or "no error given"
        return SourceState.STALE, f"Prometheus cannot scrape {target.scrape_url}: {error}"
    if not has_series:
        if target is None:
            return SourceState.STALE, "no longer scraped by Prometheus (last seen earlier)"
        if target.health == "unknown":
            return SourceState.DEGRADED, "Prometheus has not scraped it yet"
        return SourceState.DEGRADED, "no sglang: series yet (they appear with the first request)"
    if target is not None and target.health == "unknown":
        return SourceState.DEGRADED, "Prometheus has not scraped it yet"
    return SourceState.OK, None


def by_instance(series: list[Series]) -> dict[str, MetricsSnapshot]:
    """Raw series grouped into one snapshot per `instance`, as a direct scrape would read."""
    out: dict[str, MetricsSnapshot] = {}
    for item in series:
        labels = dict(item.labels)
        name = labels.pop("__name__", "")
        instance = labels.get("instance", "")
        snapshot = out.setdefault(instance, MetricsSnapshot())
        snapshot.samples.setdefault(name, []).append((labels, item.value))
    return out


def _totals(snapshot: MetricsSnapshot, name: str) -> list[float]:
    """Finite values of a gauge's total series (a non-empty `priority` is a breakdown)."""
    return [
        value
        for labels, value in snapshot.samples.get(name, ())
        if not labels.get("priority") and not (math.isnan(value) or math.isinf(value))
    ]


def _finite(value: float | None) -> float | None:
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return value


def histogram_of(series: list[Series], instance: str) -> Histogram | None:
    """Bucket increases of one instance as a Histogram (cumulative by `le`)."""
    by_bound: dict[float, float] = {}
    for item in series:
        if item.labels.get("instance") != instance:
            continue
        le = item.labels.get("le")
        if le is None or math.isnan(item.value):
            continue
        bound = math.inf if le in ("+Inf", "Inf") else float(le)
        by_bound[bound] = by_bound.get(bound, 0.0) + item.value
    if not by_bound:
        return None
    bounds = tuple(sorted(by_bound))
    counts = tuple(by_bound[b] for b in bounds)
    return Histogram(bounds, counts, counts[-1], 0.0)


class PrometheusSource:
    name = SOURCE_NAME

    def __init__(
        self,
        url: str,
        client: httpx.AsyncClient,
        *,
        interval_s: float = 1.0,
        window_s: float | None = None,
        deadline_s: float = 2.0,
        matchers: MatcherSet | None = None,
        managed: Callable[[], Sequence[ManagedEndpoint]] | None = None,
        local_names: Iterable[str] = (),
    ) -> None:
        """`window_s`: the rate window wanted (default `interval_s`); it is widened to
        RATE_SCRAPES scrape intervals where Prometheus scrapes less often. `matchers`: only
        the series and targets these select. `managed`: this host's managed servers (a
        cheap call, asked every poll); a target on one's port here reports under its id,
        and a live one no target scrapes is listed unavailable. `local_names`: this host's
        names and addresses besides loopback ones."""
        self.url = url.rstrip("/")
        self.matchers = matchers
        self.managed = managed
        self.local_names = tuple(local_names)
        self.mapped: dict[str, str] = {}
        """Scrape instance -> the managed server it is (reported under that id)."""
        self.api = PrometheusApi(url, client, deadline_s=deadline_s)
        self.interval_s = interval_s
        self.window_s = window_s if window_s is not None else interval_s
        self.rate_window_s = self.window_s
        self.scrape_interval_s: float | None = None
        self.problem: str | None = None
        """Why the last poll could not ask Prometheus; None when it could."""
        self.instances: list[str] = []
        """The SGLang servers (scrape instances) known so far."""
        self.targets: list[Target] = []
        self._gpu_numbers: dict[tuple[str, int], int] = {}
        """The console's index of each (exporter instance, GPU index) seen: kept, so a GPU's
        number never moves while exporters come and go."""
        self._last_ok: dict[SourceId, float] = {}

    def rate_window(self, targets: list[Target]) -> float:
        """The rate window for these targets' scrape intervals (remembered)."""
        intervals = [t.scrape_interval_s for t in targets if t.scrape_interval_s]
        self.scrape_interval_s = max(intervals) if intervals else DEFAULT_SCRAPE_INTERVAL_S
        return max(self.window_s, RATE_SCRAPES * self.scrape_interval_s)

    async def poll(self, now: float) -> PollResult:
        at = time.time()
        try:
            targets = self.scoped_targets(await self.api.targets())
            window = self.rate_window(targets)
            latency_window = max(LATENCY_WINDOW_S, RATE_SCRAPES * (self.scrape_interval_s or 0))
            m = self.matchers
            queries = [
                gauges_query(m),
                history_query(m),
                scoped(GPU_SELECTOR, m),
                gpu_history_query(m),
                rate_query(
                    scoped('sglang:realtime_tokens_total{mode="decode",dp_rank!=""}', m),
                    window,
                    "instance, dp_rank",
                ),
                *(rate_query(scoped(selector, m), window) for selector in COUNTER_RATES.values()),
                *(bucket_query(name, latency_window, m) for name in HISTOGRAMS.values()),
            ]
            answers = await asyncio.gather(*(self.api.query(q, at) for q in queries))
        except PrometheusError as exc:
            self.problem = str(exc)
            return self._unreachable(str(exc))
        self.problem = None
        self.targets = targets
        self.rate_window_s = window
        gauges, history, gpus, gpu_history, rank_rates, *rest = answers
        rates = dict(zip(COUNTER_RATES, rest[: len(COUNTER_RATES)], strict=True))
        buckets = dict(zip(HISTOGRAMS, rest[len(COUNTER_RATES) :], strict=True))
        result = PollResult()
        self._servers(result, now, targets, gauges, history, rates, rank_rates, buckets, window)
        self._gpu_samples(result, now, targets, gpus, gpu_history)
        return result

    def scoped_targets(self, targets: list[Target]) -> list[Target]:
        """The targets the matcher set selects (all without one)."""
        if self.matchers is None:
            return targets
        return [t for t in targets if self.matchers.matches(t.labels)]

    def server_id(self, instance: str) -> str:
        """The id an instance's figures are reported under: its managed server's, or itself."""
        return self.mapped.get(instance, instance)

    def _managed_now(self) -> list[ManagedEndpoint]:
        if self.managed is None:
            return []
        return list(self.managed())

    def _unscraped(self, managed: list[ManagedEndpoint]) -> list[str]:
        """The live managed servers no target maps to."""
        taken = set(self.mapped.values())
        return [e.server_id for e in managed if e.live and e.server_id not in taken]

    def _unreachable(self, reason: str) -> PollResult:
        ids = [self.server_id(i) for i in self.instances]
        ids += [i for i in self._unscraped(self._managed_now()) if i not in ids]
        statuses = [
            SourceStatus(
                name=SourceId.server(server_id),
                state=SourceState.STALE,
                reason=reason,
                last_ok_mono=self._last_ok.get(SourceId.server(server_id)),
            )
            for server_id in ids
        ]
        statuses.append(
            SourceStatus(name=SourceId.GPUS, state=SourceState.UNAVAILABLE, reason=reason)
        )
        return PollResult(statuses=statuses)

    def _servers(
        self,
        result: PollResult,
        now: float,
        targets: list[Target],
        gauges: list[Series],
        history: list[Series],
        rates: dict[str, list[Series]],
        rank_rates: list[Series],
        buckets: dict[str, list[Series]],
        window: float,
    ) -> None:
        snapshots = by_instance(gauges)
        current = set(snapshots)
        for series in rates["decode"]:
            current.add(series.labels.get("instance", ""))
        seen = {s.labels.get("instance", "") for s in history} | current | set(self.instances)
        seen.discard("")
        self.instances = sorted(seen)
        managed = self._managed_now()
        self.mapped = map_targets(
            {*self.instances, *(t.instance for t in targets)},
            managed,
            prometheus_url=self.url,
            local_names=self.local_names,
        )
        for server_id in self._unscraped(managed):
            result.statuses.append(
                SourceStatus(
                    name=SourceId.server(server_id),
                    state=SourceState.UNAVAILABLE,
                    reason=f"not scraped by Prometheus {self.url}",
                )
            )
        by_target = {t.instance: t for t in targets}
        for instance in self.instances:
            source = SourceId.server(self.server_id(instance))
            state, reason = target_state(by_target.get(instance), instance in current)
            if state is SourceState.STALE or instance not in current:
                result.statuses.append(
                    SourceStatus(
                        name=source,
                        state=state,
                        reason=reason,
                        last_ok_mono=self._last_ok.get(source),
                    )
                )
                continue
            snapshot = snapshots.get(instance, MetricsSnapshot())
            bad = [
                name
                for name in WATCHED_GAUGES
                if any(math.isnan(v) or math.isinf(v) for _, v in snapshot.samples.get(name, []))
            ]
            if state is SourceState.OK and bad:
                state, reason = SourceState.DEGRADED, f"NaN/Inf in {', '.join(bad)} (shown as -)"
            self._last_ok[source] = now
            result.statuses.append(
                SourceStatus(name=source, state=state, reason=reason, last_ok_mono=now)
            )
            result.samples.append(
                self._server_sample(
                    instance, source.name, now, snapshot, rates, rank_rates, buckets, window
                )
            )

    def _server_sample(
        self,
        instance: str,
        server_id: str,
        now: float,
        snapshot: MetricsSnapshot,
        rates: dict[str, list[Series]],
        rank_rates: list[Series],
        buckets: dict[str, list[Series]],
        window: float,
    ) -> ServerSample:
        def rate(key: str) -> float | None:
            for series in rates[key]:
                if series.labels.get("instance") == instance:
                    return _finite(series.value)
            return None

        def gauge_sum(name: str) -> float | None:
            values = _totals(snapshot, name)
            return math.fsum(values) if values else None

        def gauge_mean(name: str) -> float | None:
            values = _totals(snapshot, name)
            return math.fsum(values) / len(values) if values else None

        def gauge_max(name: str) -> float | None:
            values = _totals(snapshot, name)
            return max(values) if values else None

        accept_length = gauge_mean("sglang:spec_accept_length")
        accept_rate = gauge_mean("sglang:spec_accept_rate")
        if not accept_length:
            # 0 means speculative decoding is off, or no decode tick has reported yet.
            accept_length = accept_rate = None
        percentiles: dict[str, Quantile | None] = {}
        for key in HISTOGRAMS:
            histogram = histogram_of(buckets[key], instance)
            percentiles[f"{key}_p50_s"] = histogram_quantile(0.5, histogram)
            percentiles[f"{key}_p99_s"] = histogram_quantile(0.99, histogram)

        def value(key: str) -> float | None:
            found = percentiles.get(key)
            return None if found is None else found.value_s

        return ServerSample(
            t_mono=now,
            source=SourceId.server(server_id),
            server_id=server_id,
            decode_tok_s=rate("decode"),
            finished_tok_s=rate("generation"),
            requests_s=rate("requests"),
            gen_throughput=gauge_sum("sglang:gen_throughput"),
            running=gauge_sum("sglang:num_running_reqs"),
            queued=gauge_sum("sglang:num_queue_reqs"),
            token_usage=gauge_max("sglang:token_usage"),
            accept_length=accept_length,
            accept_rate=accept_rate,
            ttft_p50_s=value("ttft_p50_s"),
            ttft_p99_s=value("ttft_p99_s"),
            itl_p50_s=value("itl_p50_s"),
            itl_p99_s=value("itl_p99_s"),
            e2e_p50_s=value("e2e_p50_s"),
            e2e_p99_s=value("e2e_p99_s"),
            spec_verify_s=rate("verify"),
            latency_scope="window",
            latency_window_s=max(LATENCY_WINDOW_S, RATE_SCRAPES * (self.scrape_interval_s or 0)),
            latency_bounds=tuple(
                (key, found.lower_s, found.upper_s)
                for key, found in percentiles.items()
                if found is not None
            ),
            dp_ranks=rank_figures(snapshot, instance, rank_rates),
        )

    def _gpu_samples(
        self,
        result: PollResult,
        now: float,
        targets: list[Target],
        series: list[Series],
        history: list[Series],
    ) -> None:
        readings = gpu_readings([(dict(s.labels), s.value) for s in series])
        keys = sorted({*gpu_keys(history), *((r.instance, r.index) for r in readings)})
        self._gpu_numbers = gpu_numbers(keys, self._gpu_numbers)
        exporters = {instance for instance, _ in self._gpu_numbers}
        by_target = {t.instance: t for t in targets}
        current = set()
        for reading in readings:
            index = self._gpu_numbers[(reading.instance, reading.index)]
            gpu = SourceId.gpu(index)
            current.add((reading.instance, reading.index))
            self._last_ok[gpu] = now
            result.samples.append(gpu_sample(reading, index, now))
            result.statuses.append(SourceStatus(name=gpu, state=SourceState.OK, last_ok_mono=now))
        for key, index in sorted(self._gpu_numbers.items(), key=lambda item: item[1]):
            if key in current:
                continue
            target = by_target.get(key[0])
            reason = "its exporter's series are gone from Prometheus"
            if target is not None and target.health == "down":
                reason = f"exporter {target.instance} down: {target.last_error}"
            gpu = SourceId.gpu(index)
            result.statuses.append(
                SourceStatus(
                    name=gpu,
                    state=SourceState.STALE,
                    reason=reason,
                    last_ok_mono=self._last_ok.get(gpu),
                )
            )
        gpu_down = [t for t in targets if t.health == "down" and t.instance in exporters]
        if not readings and not gpu_down:
            result.statuses.append(
                SourceStatus(
                    name=SourceId.GPUS,
                    state=SourceState.UNAVAILABLE,
                    reason=f"Prometheus at {self.url} has no DCGM or nvitop-exporter GPU series",
                )
            )
            return
        down_reason = (
            "; ".join(f"exporter {t.instance} down: {t.last_error}" for t in gpu_down)
            if gpu_down
            else None
        )
        result.statuses.append(
            SourceStatus(
                name=SourceId.GPUS,
                state=(SourceState.STALE if not readings else SourceState.DEGRADED)
                if gpu_down
                else SourceState.OK,
                reason=down_reason,
                last_ok_mono=now if readings else None,
            )
        )

    async def close(self) -> None:
        return None


def rank_figures(
    snapshot: MetricsSnapshot, instance: str, rank_rates: list[Series]
) -> tuple[RankFigures, ...]:
    """Each DP rank's figures, as console.telemetry.dp_ranks gives them from a direct scrape;
    the rank's tok/s is Prometheus' rate of its decode counter."""
    tok_s: dict[int, float | None] = {}
    for series in rank_rates:
        rank = series.labels.get("dp_rank", "")
        if series.labels.get("instance") == instance and rank.isdigit():
            tok_s[int(rank)] = _finite(series.value)
    running = by_rank(snapshot, "sglang:num_running_reqs")
    queued = by_rank(snapshot, "sglang:num_queue_reqs")
    accept = by_rank(snapshot, "sglang:spec_accept_length")
    ranks = sorted({*tok_s, *running, *queued, *accept})
    return tuple(
        RankFigures(
            rank, tok_s.get(rank), running.get(rank), queued.get(rank), accept.get(rank) or None
        )
        for rank in ranks
    )


def gpu_keys(history: list[Series]) -> list[tuple[str, int]]:
    """(instance, index) of each GPU in a `gpu_history_query` answer (DCGM's index label is
    `gpu`, nvitop-exporter's `index`)."""
    keys = []
    for item in history:
        text = item.labels.get("gpu") or item.labels.get("index") or ""
        if text.isdigit():
            keys.append((item.labels.get("instance", ""), int(text)))
    return keys


def gpu_numbers(
    keys: list[tuple[str, int]], known: dict[tuple[str, int], int] | None = None
) -> dict[tuple[str, int], int]:
    """The console's GPU index for each (instance, exporter index), `known` ones kept: the
    exporter's own while one exporter instance is known; with several, numbered host by host
    in instance order (GPU 0 of the second host follows the first host's last). Prometheus
    remembers every GPU seen within the hour, so numbers hold while exporters come and go."""
    numbers = dict(known or {})
    single = len({i for i, _ in numbers} | {i for i, _ in keys}) <= 1
    for key in sorted(keys):
        if key in numbers:
            continue
        taken = set(numbers.values())
        if single and key[1] not in taken:
            numbers[key] = key[1]
        else:
            numbers[key] = max(taken, default=-1) + 1
    return numbers


def gpu_sample(reading: GpuReading, index: int, now: float) -> GpuSample:
    def number(field: str) -> float | None:
        return reading.value(field)

    def whole(value: float | None) -> int | None:
        return None if value is None else int(value)

    return GpuSample(
        t_mono=now,
        source=SourceId.gpu(index),
        index=index,
        name=reading.name,
        util_pct=number("util_pct"),
        mem_util_pct=number("mem_util_pct"),
        mem_used_bytes=whole(number("mem_used_bytes")),
        mem_total_bytes=whole(reading.mem_total_bytes()),
        power_w=number("power_w"),
        power_limit_w=number("power_limit_w"),
        temp_c=number("temp_c"),
        sm_clock_mhz=number("sm_clock_mhz"),
        mem_clock_mhz=number("mem_clock_mhz"),
        pcie_tx_bytes_s=number("pcie_tx_bytes_s"),
        pcie_rx_bytes_s=number("pcie_rx_bytes_s"),
        pcie_gen_current=None,
        pcie_gen_max=None,
        pcie_width_current=None,
        pcie_width_max=None,
        throttle_reasons=None,
        numa_node=None,
    )


def history_queries(window_s: float, matchers: MatcherSet | None = None) -> dict[str, str]:
    """The server series a backfill draws, by ServerSample field. `{priority=""}` also
    matches series without the label: per-priority breakdowns are left out, as the live
    readings leave them out."""

    def total(name: str) -> str:
        return scoped(name + '{priority=""}', matchers)

    decode = scoped('sglang:realtime_tokens_total{mode="decode"}', matchers)
    return {
        "decode_tok_s": rate_query(decode, window_s),
        "running": f"sum by (instance) ({total('sglang:num_running_reqs')})",
        "queued": f"sum by (instance) ({total('sglang:num_queue_reqs')})",
        "accept_length": f"avg by (instance) ({total('sglang:spec_accept_length')} > 0)",
    }


async def backfill(
    source: PrometheusSource,
    store: TimeSeriesStore,
    *,
    span_s: float,
    step_s: float,
    now_mono: float,
    now_wall: float | None = None,
) -> int:
    """Fill the store's server charts with the last `span_s` of Prometheus' history (query_range,
    a point every `step_s`), on the store's monotonic clock, before the poller starts writing:
    the dashboard then opens with history instead of an empty chart. The points written."""
    wall = time.time() if now_wall is None else now_wall
    targets = source.scoped_targets(await source.api.targets())
    written = 0
    queries = history_queries(source.rate_window(targets), source.matchers)
    for field, expr in queries.items():
        for series in await source.api.query_range(expr, wall - span_s, wall, step_s):
            instance = series.labels.get("instance")
            if not instance or not series.points:
                continue
            times = [now_mono - (wall - t) for t, _ in series.points]
            values = [_finite(v) for _, v in series.points]
            server = SourceId.server(source.server_id(instance))
            store.extend(server.series(field), times, values)
            written += len(times)
    store.commit()
    return written
