"""A continuous-batching scheduler per DP rank: a queue, a running batch, verify steps.

Requests wait in a queue until the running batch (bounded by `--max-running-requests` and
the KV pool) has room; a prefill batch produces their first token; then every decode step
commits 1 token per request (autoregressive) or a drawn number (speculative).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from console.sim.catalog import ModelEntry
from console.sim.clock import SimClock, StepTimer
from console.sim.perf import Decoding, draw_commit, prefill_time, step_time
from console.sim.prefix import NO_KEYS, PrefixCache, PrefixKeys
from console.sim.stats import FinishedRecord, SimStats
from console.sim.text import TokenStream

log = logging.getLogger("sglang.sim")


class Chunk(NamedTuple):
    """What one output batch of a request carries: cumulative counts and text/id offsets."""

    completion_tokens: int
    new_tokens: int


@dataclass(eq=False)
class SimRequest:
    rid: str
    input_len: int
    max_new: int
    stop_at: int
    streaming: bool
    tokens: TokenStream
    arrival: float
    log_metrics: bool = True
    chunks: list[Chunk] = field(default_factory=list)
    event: asyncio.Event = field(default_factory=asyncio.Event)
    generated: int = 0
    verify_ct: int = 0
    correct_drafts: int = 0
    correct_drafts_histogram: list[int] = field(default_factory=list)
    """Verify steps by drafts accepted in them (index k: steps that accepted exactly k drafts,
    bonus token excluded), grown to the largest k seen: `Req.update_spec_correct_drafts_histogram`
    (sglang 0.5.23 srt/managers/schedule_batch.py:1566-1572)."""
    first_token_at: float | None = None
    last_chunk_at: float | None = None
    finished_at: float | None = None
    finish_reason: dict[str, Any] | None = None
    admitted_at: float | None = None
    dp_rank: int = 0
    aborted: bool = False
    first_sent_at: float | None = None
    record: FinishedRecord | None = None
    priority: str = "None"
    """The request's priority as its metric label reads it (`str(req.priority)`)."""
    reasoning_tokens: int = 0
    """Leading output tokens that are thinking (with `--reasoning-parser`)."""
    prefix: PrefixKeys = NO_KEYS
    """The prompt's block keys for the prefix cache."""
    cached_tokens: int = 0
    """Prompt tokens found in the prefix cache at prefill (`meta_info["cached_tokens"]`)."""

    @property
    def done(self) -> bool:
        return self.finished_at is not None or self.aborted

    def __post_init__(self) -> None:
        self.target = min(self.max_new, self.stop_at)
        """Tokens this request will produce (its length limit or its natural stop)."""


class Engine:
    """One DP rank's scheduler loop."""

    def __init__(
        self,
        *,
        rank: int,
        model: ModelEntry,
        tp: int,
        decode: Decoding,
        clock: SimClock,
        stats: SimStats,
        seed: int,
        max_running: int,
        max_total_tokens: int,
        on_step: Callable[[Engine, float], None] | None = None,
        log_prefixes: Sequence[str] = ("",),
        prefix_cache: bool = True,
        prefill_graph_tokens: int = 0,
    ) -> None:
        self.rank = rank
        self.log_prefixes = tuple(log_prefixes) or ("",)
        """The prefixes of this DP rank's schedulers that log its batches
        (console.sim.ranklog.stats_logging_prefixes)."""
        self.model = model
        self.tp = tp
        self.decode = decode
        self.clock = clock
        self.timer = StepTimer(clock)
        self.stats = stats
        self.rng = random.Random(seed * 1000 + rank)
        self.max_running = max_running
        self.max_total_tokens = max_total_tokens
        self.on_step = on_step
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self._wake = asyncio.Event()
        self.busy_sim_s = 0.0
        """Simulated seconds spent in forward passes (GPU utilisation)."""
        self.tokens_in_steps = 0
        """Tokens processed per forward pass, summed (PCIe traffic model)."""
        self.before_prefill: Callable[[list[SimRequest]], None] | None = None
        """Called with each prefill batch before its KV slots are allocated (a fault hook)."""
        self.cache = PrefixCache(enabled=prefix_cache)
        """This rank's radix cache (off with `--disable-radix-cache`)."""
        self.prefill_graph_tokens = prefill_graph_tokens
        """The largest prefill batch a captured CUDA graph runs (0: no prefill graph)."""
        self._last_prefill_log: float | None = None

    # -- interface ---------------------------------------------------------------------------

    def submit(self, request: SimRequest) -> None:
        request.dp_rank = self.rank
        self.waiting.append(request)
        self._publish_load()
        self._wake.set()

    def abort(self, request: SimRequest) -> None:
        if request.done:
            return
        request.aborted = True
        if request in self.running:
            self.running.remove(request)
        elif request in self.waiting:
            self.waiting.remove(request)
        if request.log_metrics:
            self.stats.on_aborted()
        request.event.set()
        self._publish_load()

    @property
    def used_tokens(self) -> int:
        return sum(r.input_len + r.generated for r in self.running)

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            if self.idle:
                self.timer.idle()
                self.stats.on_idle(self.rank, self.clock.now())
                self._wake.clear()
                await self._wake.wait()
                continue
            admitted = self._admit()
            if admitted:
                await self._prefill(admitted)
            elif self.running:
                await self._decode_step()
            else:
                # Queued requests that cannot fit yet: wait for room.
                self._wake.clear()
                await self._wake.wait()

    def _admit(self) -> list[SimRequest]:
        admitted: list[SimRequest] = []
        reserved = sum(r.input_len + r.target for r in self.running)
        while self.waiting and len(self.running) + len(admitted) < self.max_running:
            candidate = self.waiting[0]
            need = candidate.input_len + candidate.target
            if reserved + need > self.max_total_tokens and (self.running or admitted):
                break
            self.waiting.popleft()
            reserved += need
            admitted.append(candidate)
        return admitted

    async def _prefill(self, batch: list[SimRequest]) -> None:
        if self.before_prefill is not None:
            self.before_prefill(batch)
        start = self.clock.now()
        cache = self.cache
        cached = 0
        for request in batch:
            request.admitted_at = start
            # Matched when the batch is formed; a prefix that two requests of one batch
            # share is computed for both, as in SGLang (inserted after the forward pass).
            hit = request.prefix.tokens(cache.match(request.prefix), request.input_len)
            request.cached_tokens = hit
            cached += hit
        # Prefill computes only the tokens the cache did not hold.
        tokens = sum(r.input_len for r in batch) - cached
        duration = prefill_time(self.model, self.tp, tokens)
        await self.timer.wait(duration)
        self.busy_sim_s += duration
        self.tokens_in_steps += tokens
        now = self.clock.now()
        # Input throughput is the batch's computed tokens over the time since the last
        # prefill log (sglang 0.5.23 srt/managers/scheduler_components/metrics_reporter.py
        # :734-744); the line's fields in its order (:753-786).
        gap = now - (self._last_prefill_log if self._last_prefill_log is not None else start)
        self._last_prefill_log = now
        self._log(
            "Prefill batch, #new-seq: %d, #new-token: %d, #cached-token: %d, token usage: "
            "%.2f, #running-req: %d, #queue-req: %d, #pending-token: %d, cuda graph: %s, "
            "input throughput (token/s): %.2f",
            len(batch),
            tokens,
            cached,
            self.used_tokens / max(1, self.max_total_tokens),
            len(self.running),
            len(self.waiting),
            sum(r.input_len for r in self.waiting),
            0 < tokens <= self.prefill_graph_tokens,
            tokens / gap if gap > 0 else 0.0,
        )
        for request in batch:
            if request.aborted:
                continue
            request.first_token_at = now
            if request.log_metrics:
                self.stats.on_first_token(
                    request.streaming, now - request.arrival, start - request.arrival, self.rank
                )
            self._emit(request, 1, now)
            if request.generated >= request.target:
                self._finish(request, now)
            else:
                self.running.append(request)
        room = self.max_total_tokens - self.used_tokens
        for request in batch:
            cache.insert(request.prefix, room)
        self._publish_load()
        self.stats.on_prefill(self.rank, tokens, now, cached)
        if self.on_step:
            self.on_step(self, now)

    async def _decode_step(self) -> None:
        batch = list(self.running)
        duration = step_time(self.decode, len(batch))
        await self.timer.wait(duration)
        self.busy_sim_s += duration
        self.tokens_in_steps += len(batch) * self.decode.verify_width
        now = self.clock.now()
        committed_total = 0
        accepted_total = 0
        stepped = 0
        speculative = self.decode.speculative
        rng = self.rng
        decode = self.decode
        gaps: dict[tuple[float, int], int] = {}
        for request in batch:
            if request.aborted:
                continue
            if speculative:
                committed, accepted = draw_commit(rng, decode)
                committed = min(committed, request.target - request.generated)
                if committed <= 0:
                    continue
                # Counted together, as batch_result_processor.py:832-836 does: the histogram
                # sums to verify_ct and its weighted sum is correct_drafts. A step that runs
                # past the length limit still counts every draft it accepted; only the output
                # is cut (sglang 0.5.23 srt/managers/schedule_batch.py:1995-2005, 2038-2042).
                request.verify_ct += 1
                request.correct_drafts += accepted
                _count_step(request.correct_drafts_histogram, accepted)
                accepted_total += accepted
            else:
                committed = 1
            stepped += 1
            committed_total += committed
            if request.log_metrics:
                key = (now - (request.last_chunk_at or now), committed)
                gaps[key] = gaps.get(key, 0) + 1
            self._emit(request, committed, now)
            if request.generated >= request.target:
                self._finish(request, now)
        for (gap, committed), requests in gaps.items():
            self.stats.on_chunk(gap, committed, requests)
        self.running = [r for r in self.running if not r.done]
        self._publish_load()
        ticked = self.stats.on_decode_step(self.rank, committed_total, stepped, accepted_total, now)
        if ticked:
            self._log_decode_tick()
        if self.on_step:
            self.on_step(self, now)

    def _emit(self, request: SimRequest, count: int, now: float) -> None:
        generated = request.generated + count
        request.tokens.ensure(generated)
        request.generated = generated
        request.last_chunk_at = now
        request.chunks.append(Chunk(generated, count))
        request.event.set()

    def _finish(self, request: SimRequest, now: float) -> None:
        request.finished_at = now
        if request.generated >= request.max_new:
            request.finish_reason = {"type": "length", "length": request.max_new}
        else:
            request.finish_reason = {"type": "stop", "matched": 151645}
        if request.log_metrics:
            request.record = FinishedRecord(
                rid=request.rid,
                dp_rank=self.rank,
                arrival=request.arrival,
                first_token=request.first_token_at or now,
                finished=now,
                prompt_tokens=request.input_len,
                completion_tokens=request.generated,
                cached_tokens=request.cached_tokens,
                verify_ct=request.verify_ct,
                chunks=len(request.chunks),
                streaming=request.streaming,
                first_sent=request.first_sent_at,
            )
            self.stats.on_finished(request.record)
        request.event.set()

    def _publish_load(self) -> None:
        running_parts: dict[str, int] | None = None
        queued_parts: dict[str, int] | None = None
        if self.stats.priority_scheduling:
            running_parts = _by_priority(self.running)
            queued_parts = _by_priority(self.waiting)
        self.stats.set_load(
            self.rank,
            len(self.running),
            len(self.waiting),
            self.used_tokens,
            self.max_total_tokens,
            running_parts,
            queued_parts,
        )

    def _log_decode_tick(self) -> None:
        totals = self.stats.ranks[self.rank]
        spec = ""
        if self.decode.speculative:
            spec = (
                f"accept len: {totals.accept_length:.2f}, accept rate: {totals.accept_rate:.2f}, "
            )
        self._log(
            "Decode batch, #running-req: %d, #token: %d, token usage: %.2f, %scuda graph: "
            "True, gen throughput (token/s): %.2f, #queue-req: %d",
            len(self.running),
            self.used_tokens,
            self.used_tokens / max(1, self.max_total_tokens),
            spec,
            self.stats.ranks[self.rank].last_gen_throughput,
            len(self.waiting),
        )

    def _log(self, message: str, *args: object) -> None:
        """A batch line, as each of this DP rank's stats-logging schedulers writes it."""
        for prefix in self.log_prefixes:
            log.info(message, *args, extra={"prefix": prefix})


def _count_step(histogram: list[int], accepted: int) -> None:
    """One verify step that accepted `accepted` drafts, grown as SGLang grows it."""
    if len(histogram) <= accepted:
        histogram.extend([0] * (accepted - len(histogram) + 1))
    histogram[accepted] += 1


def _by_priority(requests: Iterable[SimRequest]) -> dict[str, int]:
    """Requests per priority, as `QueueCount.from_reqs` counts them
    (sglang 0.5.23 srt/observability/metrics_collector.py:66-76)."""
    counts: dict[str, int] = {}
    for request in requests:
        counts[request.priority] = counts.get(request.priority, 0) + 1
    return counts
