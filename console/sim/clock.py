"""Simulated time: real time multiplied by the speed factor, or virtual time at speed 0."""

from __future__ import annotations

import asyncio
import time

# A step that starts later than this behind its deadline restarts the cadence from now.
MAX_CATCH_UP_S = 0.05


class SimClock:
    """`now()` in simulated seconds since start; speed 0 runs on a virtual clock."""

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self._start = time.monotonic()
        self._virtual = 0.0

    def now(self) -> float:
        if self.speed == 0:
            return self._virtual
        return (time.monotonic() - self._start) * self.speed

    async def sleep(self, sim_seconds: float) -> None:
        """Wait a simulated duration (startup phases, health checks)."""
        if self.speed == 0:
            self._virtual += sim_seconds
            await asyncio.sleep(0)
            return
        await asyncio.sleep(sim_seconds / self.speed)


# At speed 0 the engine yields to the event loop every this many steps, so each response
# write carries several steps' chunks instead of one write per chunk.
STEPS_PER_YIELD = 64


class StepTimer:
    """Paces back-to-back engine steps against deadlines, so sleep overshoot never drifts."""

    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self._deadline: float | None = None
        self._unyielded = 0

    async def wait(self, sim_seconds: float) -> None:
        clock = self.clock
        if clock.speed == 0:
            clock._virtual += sim_seconds
            self._unyielded += 1
            if self._unyielded >= STEPS_PER_YIELD:
                self._unyielded = 0
                await asyncio.sleep(0)
            return
        now = time.monotonic()
        base = self._deadline
        if base is None or now - base > MAX_CATCH_UP_S:
            base = now
        self._deadline = base + sim_seconds / clock.speed
        delay = self._deadline - now
        await asyncio.sleep(max(0.0, delay))

    def idle(self) -> None:
        """Forget the cadence: the next step starts from whenever work arrives."""
        self._deadline = None
