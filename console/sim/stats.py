"""What the simulated server counts: SGLang's metrics, and its own ground truth for tests.

Metric names, types, labels and update rules follow SGLang 0.5.23: scheduler gauges refresh
on decode ticks (every `decode_log_interval` steps), token counters move when a request
finishes, `realtime_tokens_total{mode="decode"}` moves every step.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from console.sim.metrics import Counter, Gauge, Histogram, Labels, Metric, exposition

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1,
    2,
    4,
    6,
    8,
    10,
    20,
    40,
    60,
    80,
    100,
    200,
    400,
    600,
    1200,
    1800,
    2400,
)
ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.010,
    0.015,
    0.020,
    0.025,
    0.030,
    0.035,
    0.040,
    0.060,
    0.080,
    0.100,
    0.200,
    0.400,
    0.600,
    0.800,
    1.000,
    2.000,
    4.000,
    6.000,
    8.000,
)
# sglang 0.5.23 srt/observability/metrics_collector.py:837-882 (scheduler labels).
QUEUE_BUCKETS = (
    0.0,
    0.001,
    0.005,
    0.010,
    0.050,
    0.100,
    0.200,
    0.500,
    1,
    2,
    3,
    4,
    5,
    10,
    15,
    20,
    30,
    40,
    50,
    60,
    70,
    80,
    90,
    100,
    200,
    300,
    400,
    500,
    600,
    700,
    800,
    900,
    1000,
    1200,
    1400,
    1600,
    1800,
    2000,
    2500,
    3000,
)
# The idle path republishes at least this often (sglang 0.5.23
# srt/managers/scheduler_components/metrics_reporter.py:1494-1498), and a prefill log reads
# gen_throughput as 0 once decode ticks stopped this long ago (metrics_reporter.py:266-274).
GEN_THROUGHPUT_STALENESS_S = 30.0
TRUTH_RECORDS = 20_000


@dataclass
class FinishedRecord:
    """Ground truth for one finished request, in simulated seconds."""

    rid: str
    dp_rank: int
    arrival: float
    first_token: float
    finished: float
    prompt_tokens: int
    completion_tokens: int
    verify_ct: int
    chunks: int
    streaming: bool
    first_sent: float | None = None
    """When the first chunk went to the socket (the server-side view of a client's TTFT)."""
    cached_tokens: int = 0
    """Prompt tokens the prefix cache held at prefill."""

    def to_json(self) -> dict[str, Any]:
        ttft = (self.first_sent or self.first_token) - self.arrival
        itl = (
            (self.finished - self.first_token) / (self.completion_tokens - 1)
            if self.completion_tokens > 1
            else None
        )
        return {
            "rid": self.rid,
            "dp_rank": self.dp_rank,
            "arrival_s": self.arrival,
            "first_token_s": self.first_token,
            "finished_s": self.finished,
            "ttft_s": ttft,
            "ttft_engine_s": self.first_token - self.arrival,
            "e2e_s": self.finished - self.arrival,
            "itl_s": itl,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "completion_tokens": self.completion_tokens,
            "verify_ct": self.verify_ct,
            "chunks": self.chunks,
            "accept_length": (self.completion_tokens / self.verify_ct if self.verify_ct else None),
            "streaming": self.streaming,
        }


@dataclass
class TickWindow:
    """Accumulates one scheduler's decode steps between decode ticks."""

    steps: int = 0
    tokens: int = 0
    request_steps: int = 0
    accepted_drafts: int = 0
    proposed_drafts: int = 0
    started_at: float = 0.0


@dataclass
class RankTotals:
    """Lifetime decode counters of one scheduler (reset by /flush_cache), and what its
    scheduler gauges would publish next."""

    decode_tokens: int = 0
    request_steps: int = 0
    window: TickWindow = field(default_factory=TickWindow)
    last_tick_at: float = 0.0
    last_gen_throughput: float = 0.0
    last_log_at: float = 0.0
    published: bool = False
    """Whether this scheduler has logged its stats once (its gauge series exist)."""
    logged_running: int = 0
    running: int = 0
    queued: int = 0
    used_tokens: int = 0
    max_tokens: int = 1
    running_by_priority: dict[str, int] = field(default_factory=dict)
    queued_by_priority: dict[str, int] = field(default_factory=dict)
    known_priorities: set[str] = field(default_factory=set)
    accept_length: float = 0.0
    accept_rate: float = 0.0
    cache_hit_rate: float = 0.0
    """The last prefill batch's hit ratio (prefill-owned: decode ticks keep it)."""


def prepare_buckets(source: Iterable[float]) -> list[float]:
    """Bucket bounds as prometheus_client's Histogram takes them: unsorted raises, no
    dedup, a trailing +Inf is dropped here because the exposition adds its own
    (prometheus_client metrics.py Histogram._prepare_buckets)."""
    bounds = [float(b) for b in source]
    if bounds != sorted(bounds):
        raise ValueError("Buckets not in sorted order")
    if bounds and math.isinf(bounds[-1]):
        bounds.pop()
    if not bounds:
        raise ValueError("Must have at least two buckets")
    return bounds


class SimStats:
    """SGLang's metrics as the simulated processes would publish them.

    Series appear on first use, as with prometheus_client children: scheduler gauges at a
    scheduler's first stats log (a prefill batch, a decode tick, or the idle path), counters
    at their first non-zero increment, so a non-speculative server never shows
    `spec_verify_calls_total` (sglang 0.5.23 srt/observability/metrics_collector.py:1558-1572,
    2111-2112). Only `max_total_num_tokens` exists from startup (`emit_constants`, :1769-1782).
    """

    def __init__(
        self,
        model_name: str,
        dp_size: int,
        spec_on: bool,
        num_draft_tokens: int,
        decode_log_interval: int,
        ttft_buckets: list[float] | None = None,
        itl_buckets: list[float] | None = None,
        e2e_buckets: list[float] | None = None,
    ) -> None:
        # `--bucket-*` flags replace the defaults; TPOT shares the ITL list
        # (sglang 0.5.23 srt/managers/tokenizer_manager.py:846-848,
        # srt/observability/metrics_collector.py:2058-2065).
        self.ttft_buckets = prepare_buckets(ttft_buckets or TTFT_BUCKETS)
        self.itl_buckets = prepare_buckets(itl_buckets or ITL_BUCKETS)
        self.e2e_buckets = prepare_buckets(e2e_buckets or E2E_BUCKETS)
        self.model_name = model_name
        self.dp_size = dp_size
        self.spec_on = spec_on
        self.num_draft_tokens = num_draft_tokens
        self.decode_log_interval = max(1, decode_log_interval)
        self.priority_scheduling = False
        """`--enable-priority-scheduling`: scheduler labels gain `priority` (set by SimState)."""
        self.ranks = [RankTotals() for _ in range(dp_size)]
        self.truth_decode_tokens = 0
        self.truth_request_steps = 0
        self.truth_steps = 0
        self.records: deque[FinishedRecord] = deque(maxlen=TRUTH_RECORDS)
        self.tokenizer_labels: Labels = (("model_name", model_name), ("engine_type", "unified"))
        m = self._make_metrics()
        self.metrics: list[Metric] = m

    # -- labels ------------------------------------------------------------------------------

    def scheduler_labels(self, rank: int, priority: str = "") -> Labels:
        """Scheduler labels in SGLang's order; with priority scheduling the default series is
        `priority=""` (the total) and breakdowns carry the priority value
        (sglang 0.5.23 srt/observability/metrics_collector.py:1382-1392, 1417-1430)."""
        labels: Labels = (
            ("model_name", self.model_name),
            ("engine_type", "unified"),
            ("tp_rank", "0"),
            ("pp_rank", "0"),
            ("moe_ep_rank", "0"),
        )
        if self.priority_scheduling:
            labels = (*labels, ("priority", priority))
        if self.dp_size > 1:
            labels = (*labels, ("dp_rank", str(rank)))
        return labels

    def _streaming(self, streaming: bool) -> Labels:
        return (*self.tokenizer_labels, ("is_streaming", "true" if streaming else "false"))

    # -- metric objects ----------------------------------------------------------------------

    def _make_metrics(self) -> list[Metric]:
        self.gen_throughput = Gauge("sglang:gen_throughput", "The generation throughput (token/s).")
        self.num_running = Gauge("sglang:num_running_reqs", "The number of running requests.")
        self.num_queue = Gauge(
            "sglang:num_queue_reqs", "The number of requests in the waiting queue."
        )
        self.num_used_tokens = Gauge("sglang:num_used_tokens", "The number of used tokens.")
        self.token_usage = Gauge("sglang:token_usage", "The token usage.")
        self.spec_accept_length = Gauge(
            "sglang:spec_accept_length", "The average acceptance length of speculative decoding."
        )
        self.spec_accept_rate = Gauge(
            "sglang:spec_accept_rate", "The average acceptance rate of speculative decoding."
        )
        self.cache_hit_rate = Gauge("sglang:cache_hit_rate", "The prefix cache hit rate.")
        self.utilization = Gauge("sglang:utilization", "The utilization.")
        self.max_total_num_tokens = Gauge(
            "sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."
        )
        self.realtime_tokens = Counter(
            "sglang:realtime_tokens_total",
            "Number of tokens processed, updated every forward step.",
        )
        # sglang 0.5.23 srt/observability/metrics_collector.py:1040-1054 (help text shortened).
        self.prefill_effective_tokens = Counter(
            "sglang:prefill_effective_tokens_total",
            "Effective prefill tokens with retracted-request re-counts excluded, updated on "
            "each log interval. mode: device_hit, host_hit, storage_hit, input.",
        )
        # A tokenizer metric, per finished request (metrics_collector.py:1934-1938, 2114-2134).
        self.cached_tokens = Counter(
            "sglang:cached_tokens_total",
            "Number of cached prompt tokens by source (device/host/storage).",
        )
        self.prompt_tokens = Counter(
            "sglang:prompt_tokens_total", "Number of prefill tokens processed."
        )
        self.generation_tokens = Counter(
            "sglang:generation_tokens_total", "Number of generation tokens processed."
        )
        self.num_requests = Counter("sglang:num_requests_total", "Number of requests processed.")
        self.num_aborted = Counter(
            "sglang:num_aborted_requests_total", "Number of requests aborted."
        )
        self.spec_verify_calls = Counter(
            "sglang:spec_verify_calls_total", "Number of speculative decoding verification calls."
        )
        self.ttft = Histogram(
            "sglang:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            self.ttft_buckets,
        )
        self.itl = Histogram(
            "sglang:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            self.itl_buckets,
        )
        self.tpot = Histogram(
            "sglang:request_time_per_output_token_seconds",
            "Per-request TPOT in seconds: (finished_time - first_token_time) / "
            "(completion_tokens - 1).",
            self.itl_buckets,
        )
        self.e2e = Histogram(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            self.e2e_buckets,
        )
        self.queue_time = Histogram(
            "sglang:queue_time_seconds", "Histogram of queueing time in seconds.", QUEUE_BUCKETS
        )
        return [
            self.gen_throughput,
            self.num_running,
            self.num_queue,
            self.num_used_tokens,
            self.token_usage,
            self.spec_accept_length,
            self.spec_accept_rate,
            self.cache_hit_rate,
            self.utilization,
            self.max_total_num_tokens,
            self.realtime_tokens,
            self.prefill_effective_tokens,
            self.prompt_tokens,
            self.generation_tokens,
            self.num_requests,
            self.cached_tokens,
            self.num_aborted,
            self.spec_verify_calls,
            self.ttft,
            self.itl,
            self.tpot,
            self.e2e,
            self.queue_time,
        ]

    def start(self, now: float) -> None:
        """The schedulers start: the idle path's 30 s and the throughput staleness count
        from here (metrics_collector.py:358, metrics_reporter.py:280)."""
        for rank, totals in enumerate(self.ranks):
            totals.last_log_at = now
            totals.last_tick_at = now
            # Every mode is pre-seeded at 0 (metrics_collector.py:1051-1054).
            labels = self.scheduler_labels(rank)
            for mode in ("input", "device_hit", "host_hit", "storage_hit"):
                self.prefill_effective_tokens.inc((*labels, ("mode", mode)), 0)

    # -- the scheduler's stats log -----------------------------------------------------------

    def _log_stats(self, rank: int, now: float) -> None:
        """Every scheduler gauge at once, as `log_stats` does (metrics_collector.py:1646-1680);
        the queue gauges with their per-priority breakdown (:1417-1430)."""
        totals = self.ranks[rank]
        labels = self.scheduler_labels(rank)
        self._queue_gauge(self.num_running, rank, totals.running, totals.running_by_priority)
        self._queue_gauge(self.num_queue, rank, totals.queued, totals.queued_by_priority)
        self.gen_throughput.set(labels, totals.last_gen_throughput)
        self.cache_hit_rate.set(labels, totals.cache_hit_rate)
        self.token_usage.set(labels, totals.used_tokens / max(1, totals.max_tokens))
        self.num_used_tokens.set(labels, totals.used_tokens)
        self.spec_accept_length.set(labels, totals.accept_length)
        self.spec_accept_rate.set(labels, totals.accept_rate)
        self.utilization.set(labels, 0.0)
        totals.logged_running = totals.running
        totals.last_log_at = now
        totals.published = True

    def _queue_gauge(self, gauge: Gauge, rank: int, total: int, parts: dict[str, int]) -> None:
        totals = self.ranks[rank]
        gauge.set(self.scheduler_labels(rank), total)
        if not self.priority_scheduling:
            return
        totals.known_priorities.update(parts)
        for priority in totals.known_priorities:
            gauge.set(self.scheduler_labels(rank, priority), parts.get(priority, 0))

    # -- events ------------------------------------------------------------------------------

    def on_prefill(self, rank: int, tokens: int, now: float, cached: int = 0) -> None:
        """A prefill batch of `tokens` computed and `cached` reused tokens: realtime and
        effective prefill tokens, the batch's hit rate, then a stats log whose gen_throughput
        is 0 once decode ticks are stale (metrics_reporter.py:266-274, 810-868)."""
        labels = self.scheduler_labels(rank)
        if tokens:
            self.realtime_tokens.inc((*labels, ("mode", "prefill_compute")), tokens)
            self.prefill_effective_tokens.inc((*labels, ("mode", "input")), tokens)
        if cached:
            self.realtime_tokens.inc((*labels, ("mode", "prefill_cache")), cached)
            self.prefill_effective_tokens.inc((*labels, ("mode", "device_hit")), cached)
        totals = self.ranks[rank]
        total = tokens + cached
        totals.cache_hit_rate = cached / total if total > 0 else 0.0
        if now - totals.last_tick_at > GEN_THROUGHPUT_STALENESS_S:
            totals.last_gen_throughput = 0.0
        self._log_stats(rank, now)

    def on_decode_step(
        self, rank: int, tokens: int, requests: int, accepted_drafts: int, now: float
    ) -> bool:
        """Count one verify step; True when it completes a decode tick (gauges refreshed)."""
        labels = self.scheduler_labels(rank)
        if tokens:
            self.realtime_tokens.inc((*labels, ("mode", "decode")), tokens)
        totals = self.ranks[rank]
        totals.decode_tokens += tokens
        totals.request_steps += requests
        self.truth_decode_tokens += tokens
        self.truth_request_steps += requests
        self.truth_steps += 1
        window = totals.window
        if window.steps == 0:
            window.started_at = totals.last_tick_at
        window.steps += 1
        window.tokens += tokens
        window.request_steps += requests
        window.accepted_drafts += accepted_drafts
        window.proposed_drafts += requests * max(0, self.num_draft_tokens - 1)
        if window.steps < self.decode_log_interval:
            return False
        elapsed = max(1e-9, now - totals.last_tick_at)
        totals.last_gen_throughput = window.tokens / elapsed
        if self.spec_on:
            totals.accept_length = window.tokens / max(1, window.request_steps)
            totals.accept_rate = window.accepted_drafts / max(1, window.proposed_drafts)
        totals.last_tick_at = now
        totals.window = TickWindow()
        self._log_stats(rank, now)
        return True

    def set_load(
        self,
        rank: int,
        running: int,
        queued: int,
        used_tokens: int,
        max_tokens: int,
        running_by_priority: dict[str, int] | None = None,
        queued_by_priority: dict[str, int] | None = None,
    ) -> None:
        """The scheduler's current load, published at its next stats log; the pool size is a
        startup constant (`emit_constants`)."""
        totals = self.ranks[rank]
        totals.running = running
        totals.queued = queued
        totals.used_tokens = used_tokens
        totals.max_tokens = max_tokens
        totals.running_by_priority = running_by_priority or {}
        totals.queued_by_priority = queued_by_priority or {}
        self.max_total_num_tokens.set(self.scheduler_labels(rank), max_tokens)

    def on_idle(self, rank: int, now: float) -> None:
        """The idle path: publish gen_throughput 0 at once when the running gauge still
        shows a batch, and otherwise every 30 s (metrics_reporter.py:1476-1532)."""
        totals = self.ranks[rank]
        stale = totals.published and totals.logged_running != totals.running
        if not stale and now <= totals.last_log_at + GEN_THROUGHPUT_STALENESS_S:
            return
        totals.last_gen_throughput = 0.0
        self._log_stats(rank, now)

    def on_first_token(
        self, streaming: bool, ttft: float, queue_time: float, rank: int = 0
    ) -> None:
        self.ttft.observe(self._streaming(streaming), ttft)
        # Queue time is a scheduler metric (metrics_collector.py:837, 1479-1480).
        self.queue_time.observe(self.scheduler_labels(rank), queue_time)

    def on_chunk(self, gap: float, tokens: int, requests: int = 1) -> None:
        """`requests` output batches of `tokens` tokens each, `gap` after their previous one."""
        if tokens > 0:
            self.itl.observe(self.tokenizer_labels, gap / tokens, times=tokens * requests)

    def on_finished(self, record: FinishedRecord) -> None:
        streaming = self._streaming(record.streaming)
        self.prompt_tokens.inc(streaming, record.prompt_tokens)
        self.generation_tokens.inc(streaming, record.completion_tokens)
        self.num_requests.inc(streaming)
        if record.cached_tokens > 0:
            # cached_tokens_details is {"device": N, "host": 0} without a hierarchical cache
            # (srt/managers/scheduler_components/output_streamer.py:102-131).
            self.cached_tokens.inc(
                (*self.tokenizer_labels, ("cache_source", "device")), record.cached_tokens
            )
        # Only a request that verified creates the series (metrics_collector.py:2111-2112).
        if self.spec_on and record.verify_ct > 0:
            self.spec_verify_calls.inc(self.tokenizer_labels, record.verify_ct)
        self.e2e.observe(streaming, record.finished - record.arrival)
        if record.completion_tokens > 1:
            self.tpot.observe(
                streaming, (record.finished - record.first_token) / (record.completion_tokens - 1)
            )
        self.records.append(record)

    def on_aborted(self) -> None:
        self.num_aborted.inc(self.tokenizer_labels)

    def avg_spec_accept_length(self, rank: int) -> float | None:
        totals = self.ranks[rank]
        if not self.spec_on or totals.request_steps == 0:
            return None
        return totals.decode_tokens / totals.request_steps

    def flush(self) -> None:
        """/flush_cache resets the lifetime speculative averages."""
        for totals in self.ranks:
            totals.decode_tokens = 0
            totals.request_steps = 0

    def reset_counters(self) -> None:
        """Every counter and histogram back to zero, as after a restart (fault injection)."""
        for metric in self.metrics:
            metric.reset()

    def render(self) -> str:
        return exposition(self.metrics)
