"""BlockingCaller: deadlines, stalls, and a caller that is cancelled always stops."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from console.telemetry.blocking import BlockingCaller, Stalled


async def test_a_slow_call_stalls_and_the_next_tick_is_skipped():
    caller = BlockingCaller("test", timeout_s=0.05)
    release = threading.Event()
    try:
        with pytest.raises(Stalled):
            await caller.call(lambda: release.wait(5))
        with pytest.raises(Stalled, match="running for"):
            await caller.call(lambda: 1)
        release.set()
        await asyncio.sleep(0.05)
        assert await caller.call(lambda: 2) == 2
    finally:
        release.set()
        caller.close()


async def test_a_polling_loop_stops_when_cancelled_even_as_its_call_returns():
    """Cancel lands while the executor's result is on its way back: 3.11's wait_for would
    return the result and swallow the cancellation, and the loop would run forever."""
    caller = BlockingCaller("test", timeout_s=1.0)

    async def poll_forever() -> None:
        while True:
            await caller.call(lambda: time.sleep(0.0005))

    try:
        for attempt in range(300):
            task = asyncio.create_task(poll_forever())
            await asyncio.sleep(0.0005 * (attempt % 7))
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=1.0)
            assert done, f"the loop ignored its cancellation (attempt {attempt})"
            assert task.cancelled()
    finally:
        caller.close()
