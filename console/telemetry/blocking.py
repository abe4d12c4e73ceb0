"""Blocking calls on a dedicated one-thread executor, under a deadline, never queued.

A call still running when the next tick comes marks its source stalled; that tick is skipped
instead of piling another call behind a hung driver.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Stalled(Exception):
    """The previous call has not returned yet (or this one missed its deadline)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"a call has been running for {seconds:.1f} s")
        self.seconds = seconds


class BlockingCaller:
    def __init__(self, name: str, timeout_s: float) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self._executor = concurrent.futures.ThreadPoolExecutor(1, f"ddconsole-{name}")
        self._pending: asyncio.Future[object] | None = None
        self._pending_since = 0.0

    async def call(self, function: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        if self._pending is not None:
            if not self._pending.done():
                raise Stalled(loop.time() - self._pending_since)
            self._pending = None
        future = loop.run_in_executor(self._executor, function)
        self._pending_since = loop.time()
        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for returns the result when the
            # call finishes just as the caller is cancelled, so a stopping loop never stops.
            async with asyncio.timeout(self.timeout_s):
                result = await asyncio.shield(future)
        except TimeoutError:
            self._pending = future  # type: ignore[assignment]
            future.add_done_callback(_consume)
            raise Stalled(self.timeout_s) from None
        return result

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve a late result or error so asyncio does not warn about it."""
    if not future.cancelled():
        future.exception()
