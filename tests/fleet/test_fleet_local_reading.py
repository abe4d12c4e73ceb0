"""The console's fleet reads `local` from the console's own monitor (a callable), not from a
second `metrics --watch` process scraping the same servers and GPUs again."""

from __future__ import annotations

import json
from typing import Any

import psutil

from console.fleet.fleet import Fleet
from console.fleet.hosts import LOCAL, LOCAL_HOST
from tests.conftest import REPO

READING = json.loads(
    (REPO / "tests" / "unit" / "fixtures" / "metrics-demo-reading.json").read_text()
)


async def test_local_comes_from_the_consoles_own_reading() -> None:
    calls: list[int] = []

    def local_reading() -> dict[str, Any] | None:
        calls.append(1)
        return None if len(calls) == 1 else READING  # none yet on the first tick

    fleet = Fleet([LOCAL_HOST], interval_s=0.05, local_reading=local_reading)
    await fleet.start()
    try:
        assert await fleet.wait_settled(10)
        summary = fleet.summary(LOCAL)
        assert summary.state == "up"
        assert [s.id for s in summary.servers] == [s["id"] for s in READING["servers"]]
        assert summary.gpus_total == len(READING["gpus"])
        assert fleet.link_state(LOCAL) == "up"
        # No second process watches this host.
        watchers = [p for p in psutil.Process().children() if "metrics" in p.cmdline()]
        assert watchers == []
    finally:
        await fleet.stop()


async def test_a_failing_local_reading_turns_local_stale_with_the_reason() -> None:
    def broken() -> dict[str, Any] | None:
        raise RuntimeError("store gone")

    fleet = Fleet([LOCAL_HOST], interval_s=0.05, local_reading=broken)
    await fleet.start()
    try:
        assert await fleet.wait_settled(10)
        summary = fleet.summary(LOCAL)
        assert summary.state == "stale"
        assert summary.reason == "this host's reading failed: RuntimeError: store gone"
    finally:
        await fleet.stop()
