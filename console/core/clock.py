"""Clocks: the real monotonic/wall clock and a fake one for tests and snapshots."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> float: ...


class SystemClock:
    """`time.monotonic()` for intervals and rates, `time.time()` only for exports."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()


class FakeClock:
    """A clock that moves only when told to; wall time follows monotonic time."""

    def __init__(self, start: float = 1000.0, wall_start: float = 1_790_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start

    def monotonic(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    def advance(self, seconds: float) -> None:
        self._now += seconds
