"""A running level's figures as its requests finish: completed/total, errors, output tok/s,
ETA and the client's latency percentiles, folded into the `Progress` that `progress.json`
holds. Pure bookkeeping; the campaign runner decides when to write it."""

from __future__ import annotations

import time
from bisect import insort
from dataclasses import replace

from console.bench.acceptance import sum_histograms
from console.bench.levels import LevelSpec
from console.bench.listing import LevelProgress, Progress
from console.bench.results import RequestResult
from console.bench.stats import percentile


class LevelTracker:
    """Counts one level's finished requests; `progress()` is the level as of now. `levels`
    is the cell's level count, 0 in a saturation search (not known ahead: the level then
    reads `level 3, searching`)."""

    def __init__(
        self,
        base: Progress,
        spec: LevelSpec,
        *,
        levels: int,
        time_scale: float = 1.0,
        now: float | None = None,
    ) -> None:
        self.base = base
        self.spec = spec
        self.levels = levels
        self.time_scale = time_scale if time_scale > 0 else 1.0
        self.started_wall = time.time() if now is None else now
        """When the level began (warm-up included); replaced by its first request's send."""
        self.first_send_wall: float | None = None
        self.completed = 0
        self.errors = 0
        self.output_tokens = 0
        self.ttfts: list[float] = []
        self.itls: list[float] = []
        self.histogram: tuple[int, ...] | None = None
        """The finished requests' accepted-drafts histograms, summed."""

    def add(self, result: RequestResult) -> None:
        self.completed += 1
        if self.first_send_wall is None or result.send_wall < self.first_send_wall:
            self.first_send_wall = result.send_wall
        if result.error is not None:
            self.errors += 1
            return
        self.output_tokens += int(result.output_tokens or 0)
        if result.ttft_s is not None:
            insort(self.ttfts, result.ttft_s)
        if result.itl_s is not None:
            insort(self.itls, result.itl_s)
        if result.spec_correct_drafts_histogram:
            self.histogram = sum_histograms([self.histogram, result.spec_correct_drafts_histogram])

    def live(self, now: float | None = None) -> LevelProgress:
        now = time.time() if now is None else now
        since = self.first_send_wall if self.first_send_wall is not None else self.started_wall
        elapsed = max(0.0, now - since)
        ok = self.completed - self.errors
        tok_s = None
        if ok and elapsed > 0:
            tok_s = self.output_tokens / (elapsed * self.time_scale)
        return LevelProgress(
            index=self.spec.index,
            of=self.levels,
            concurrency=self.spec.concurrency,
            rate=self.spec.rate,
            completed=self.completed,
            total=self.spec.requests,
            errors=self.errors,
            output_tok_s=tok_s,
            elapsed_s=elapsed,
            eta_s=self._eta(elapsed),
        )

    def _eta(self, elapsed: float) -> float | None:
        """Real seconds left: the requests left at the pace so far, or a timed level's rest."""
        if self.spec.duration_s is not None and self.spec.requests is None:
            if self.first_send_wall is None:
                return None
            return max(0.0, self.spec.duration_s / self.time_scale - elapsed)
        total = self.spec.requests
        if total is None or self.completed == 0 or elapsed <= 0:
            return None
        left = max(0, total - self.completed)
        return left * elapsed / self.completed

    def progress(self, now: float | None = None) -> Progress:
        """The `Progress` to write: the level's cell and server, its counts and latencies."""
        return replace(
            self.base,
            done=self.completed,
            ttft_p50_s=percentile(self.ttfts, 50),
            ttft_p99_s=percentile(self.ttfts, 99),
            itl_p50_s=percentile(self.itls, 50),
            itl_p99_s=percentile(self.itls, 99),
            live=self.live(now),
            correct_drafts_histogram=self.histogram,
        )
