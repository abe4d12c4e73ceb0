"""A host's telemetry stream as the fleet reads it, from a host whose `ddconsole` is a script:
a line that is not a reading is skipped and counted (the host stays up on the next good
one), and a stream that ends makes the host stale with the command's last words, then is
started again."""

from __future__ import annotations

import asyncio
import time

from console.fleet.fleet import Fleet
from console.fleet.hosts import Host
from tests.fleet.conftest import SshWorld

SCRIPT = """#!/bin/sh
echo 'this is not a reading'
echo '{"time": 1.0, "gpus": [{"index": 0, "util_pct": 50.0}], "servers": [], "sources": []}'
sleep 1
echo 'metrics: the host went away' >&2
exit 3
"""


def test_bad_lines_degrade_and_an_ended_stream_is_stale(ssh_world: SshWorld) -> None:
    beta = ssh_world.hosts["beta"]
    script = beta.root / "odd-ddconsole"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    host = Host("odd", f"tester@{beta.address}:{beta.port}", str(script))

    async def scenario() -> None:
        fleet = Fleet([host], interval_s=0.5, backoff_initial_s=0.2, backoff_max_s=0.5)
        seen: list[tuple[str, str | None, int]] = []
        fleet.subscribe(lambda s: seen.append((s.state, s.reason, s.parse_errors)))
        await fleet.start()
        try:
            deadline = time.monotonic() + 60
            while sum(1 for state, *_ in seen if state == "stale") < 2:
                assert time.monotonic() < deadline, seen
                await asyncio.sleep(0.1)
        finally:
            await fleet.stop()
        up = [entry for entry in seen if entry[0] == "up"]
        assert up, seen
        assert up[0][2] == 1  # the bad line, skipped and counted
        stale = [entry for entry in seen if entry[0] == "stale"]
        assert stale[0][1] == "telemetry stream ended: metrics: the host went away"
        # Started again after the backoff: a second good reading came in between.
        first_stale = seen.index(stale[0])
        assert any(state == "up" for state, *_ in seen[first_stale:]), seen
        summary = fleet.summary("odd")
        assert (summary.gpus_busy, summary.gpus_total) == (1, 1)

    asyncio.run(scenario())
