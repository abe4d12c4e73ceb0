"""The single writer of the store: polls every source on its own interval, on one loop.

Each source runs as its own task against a monotonic deadline (`next += interval`, no
drift); a tick that comes while the previous poll is still running is skipped, not queued.
Sources whose calls block do them on their own executor (see `blocking`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable

from console.telemetry.keys import SourceId
from console.telemetry.samples import (
    CostSample,
    HostSample,
    SourceState,
    SourceStatus,
    series_values,
)
from console.telemetry.source import PollResult, Source
from console.telemetry.store import TimeSeriesStore

log = logging.getLogger(__name__)
# A source without a successful poll for this many intervals is shown as stale.
STALE_AFTER_INTERVALS = 3


def write_result(store: TimeSeriesStore, result: PollResult) -> None:
    """Put one poll's samples and statuses into the store (the poller's only write path)."""
    for sample in result.samples:
        source = sample.source
        for name, value in series_values(sample).items():
            store.append(source.series(name), sample.t_mono, value)
        if isinstance(sample, HostSample):
            for node in sample.numa:
                store.append(
                    source.series(f"numa.{node.node}.cpu_pct"), sample.t_mono, node.cpu_pct
                )
        if isinstance(sample, CostSample):
            for name, ms in sample.poll_ms:
                store.append(source.series(f"poll_ms.{name}"), sample.t_mono, ms)
        store.put_latest(sample)
    for status in result.statuses:
        store.set_status(status)


class Poller:
    def __init__(
        self, store: TimeSeriesStore, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self.clock = clock
        self.sources: dict[SourceId, Source] = {}
        self._tasks: dict[SourceId, asyncio.Task[None]] = {}
        self.poll_seconds: dict[SourceId, float] = {}
        self.running = False
        self.listeners: list[Callable[[float, PollResult], None]] = []
        """Called with every poll's result as it is written (the flight recorder)."""

    # -- source set ----------------------------------------------------------------------

    def add(self, source: Source) -> None:
        if source.name in self.sources:
            return
        self.sources[source.name] = source
        if self.running:
            self._tasks[source.name] = asyncio.create_task(self._loop(source))

    async def remove(self, name: SourceId) -> None:
        source = self.sources.pop(name, None)
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if source is not None:
            await source.close()
        self.poll_seconds.pop(name, None)
        self.store.forget_source(name)

    # -- polling -------------------------------------------------------------------------

    async def poll_once(self, source: Source) -> None:
        started = time.perf_counter()
        now = self.clock()
        try:
            result = await source.poll(now)
        except Exception as exc:  # a bug in one source must not stop the others
            log.exception("source %s failed", source.name)
            result = PollResult(
                statuses=[
                    SourceStatus(
                        name=source.name,
                        state=SourceState.UNAVAILABLE,
                        reason=f"{type(exc).__name__}: {exc}",
                    )
                ]
            )
        self.poll_seconds[source.name] = time.perf_counter() - started
        result.statuses = [
            s
            if s.name != source.name
            else dataclasses.replace(s, last_poll_s=self.poll_seconds[source.name])
            for s in result.statuses
        ]
        write_result(self.store, result)
        self._mark_stale(now)
        self.store.commit()
        for listener in self.listeners:
            try:
                listener(now, result)
            except Exception:  # a failing recorder must not stop the polling
                log.exception("poll listener failed")

    def _mark_stale(self, now: float) -> None:
        for name, status in self.store.statuses().items():
            source = self.sources.get(name)
            if source is None or status.state is not SourceState.OK or status.last_ok_mono is None:
                continue
            if now - status.last_ok_mono > STALE_AFTER_INTERVALS * source.interval_s:
                self.store.set_status(
                    dataclasses.replace(status, state=SourceState.STALE, reason="no fresh reading")
                )

    async def poll_all_once(self) -> None:
        await asyncio.gather(*(self.poll_once(s) for s in list(self.sources.values())))

    async def _loop(self, source: Source) -> None:
        deadline = self.clock()
        while True:
            await self.poll_once(source)
            deadline += source.interval_s
            now = self.clock()
            if now > deadline:
                # Late: skip the missed ticks instead of running them back to back.
                missed = int((now - deadline) / source.interval_s) + 1
                deadline += missed * source.interval_s
            await asyncio.sleep(max(0.0, deadline - now))

    def start(self) -> None:
        self.running = True
        for name, source in self.sources.items():
            if name not in self._tasks:
                self._tasks[name] = asyncio.create_task(self._loop(source))

    async def stop(self) -> None:
        self.running = False
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for source in self.sources.values():
            await source.close()
