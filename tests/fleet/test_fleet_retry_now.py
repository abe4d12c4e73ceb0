"""A stale host is tried again at the end of its backoff, which the fleet says (the Fleet
screen's `stale, retry in Ns`), or at once on request (`R` there): a host that came back is
not left waiting up to 30 s."""

from __future__ import annotations

import asyncio
import time

from console.fleet.fleet import Fleet
from console.fleet.hosts import Host
from console.tui.screens.fleet import host_cells
from tests.fleet.ports import refusing_port  # noqa: F401 (fixture)


async def test_a_stale_host_says_when_it_is_tried_and_is_tried_now_on_request(
    refusing_port: int,  # noqa: F811
) -> None:
    host = Host("gone", f"nobody@127.0.0.1:{refusing_port}")
    fleet = Fleet([host], connect_timeout_s=5, backoff_initial_s=40, backoff_max_s=80)
    await fleet.start()
    try:
        deadline = time.monotonic() + 20
        while fleet.summary("gone").next_try_s is None:
            assert time.monotonic() < deadline, fleet.summary("gone")
            await asyncio.sleep(0.05)
        first = fleet.summary("gone")
        assert first.state == "stale"
        assert first.next_try_s is not None
        assert 30 < first.next_try_s <= 40
        updated = host_cells(first)[6]
        assert ", retry in " in str(updated)

        assert fleet.retry_now("gone")
        # Tried again at once, and refused again: the next wait is the doubled backoff.
        deadline = time.monotonic() + 20
        while (fleet.summary("gone").next_try_s or 0) <= 40:
            assert time.monotonic() < deadline, fleet.summary("gone")
            await asyncio.sleep(0.05)
        assert not Fleet([Host("idle", "x@127.0.0.1:1")]).retry_now("idle")  # not waiting
    finally:
        await fleet.stop()
