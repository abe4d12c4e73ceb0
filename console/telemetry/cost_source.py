"""The console's own cost as a source: its CPU share and how long each source's poll took."""

from __future__ import annotations

from collections.abc import Callable

from console.hw.host import own_cpu_seconds, own_rss_bytes
from console.telemetry.keys import SourceId
from console.telemetry.samples import CostSample, SourceState, SourceStatus
from console.telemetry.source import PollResult


class CostSource:
    name = SourceId.CONSOLE

    def __init__(
        self, poll_times: Callable[[], dict[SourceId, float]], *, interval_s: float = 1.0
    ) -> None:
        self.poll_times = poll_times
        self.interval_s = interval_s
        self._last: tuple[float, float] | None = None
        self._ticks = 0
        self._rss: int | None = None

    async def poll(self, now: float) -> PollResult:
        cpu = own_cpu_seconds()
        share = None
        if self._last is not None and now > self._last[0]:
            share = 100.0 * (cpu - self._last[1]) / (now - self._last[0])
        self._last = (now, cpu)
        if self._ticks % 10 == 0:
            self._rss = own_rss_bytes()
        self._ticks += 1
        poll_ms = tuple(
            sorted((str(name), seconds * 1000) for name, seconds in self.poll_times().items())
        )
        sample = CostSample(
            t_mono=now, source=self.name, cpu_pct=share, rss_bytes=self._rss, poll_ms=poll_ms
        )
        return PollResult(
            [sample], [SourceStatus(name=self.name, state=SourceState.OK, last_ok_mono=now)]
        )

    async def close(self) -> None:
        return None
