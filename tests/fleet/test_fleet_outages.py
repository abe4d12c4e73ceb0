"""The fleet's telemetry stream of a host that misbehaves, from fake SSH hosts whose
`ddconsole` is a script: a chatty stderr does not stall the readings (and its last line is the
reason when the stream ends), a stream that dies after one reading is restarted ever more
slowly, and a host that hangs with its connection open turns stale and comes back."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

from console.fleet.fleet import Fleet
from console.fleet.hosts import Host
from tests.fleet.conftest import SshWorld

READING = '{"time": 1.0, "gpus": [{"index": 0, "util_pct": 50.0}], "servers": [], "sources": []}'
Event = tuple[float, str, str | None, int]


def _watch(fleet: Fleet) -> list[Event]:
    """Every change of the fleet's one host: (seconds since now, state, reason, bad lines)."""
    start = time.monotonic()
    seen: list[Event] = []
    fleet.subscribe(
        lambda s: seen.append((time.monotonic() - start, s.state, s.reason, s.parse_errors))
    )
    return seen


async def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.1)


def test_a_chatty_stderr_does_not_stall_the_readings(ssh_world: SshWorld) -> None:
    beta = ssh_world.hosts["beta"]
    # 256 KiB of warnings with every reading: the channel window (2 MiB) would fill within
    # two seconds were stderr left unread, and the readings behind it would stop.
    script = beta.script(
        "chatty",
        f"i=0\nwhile [ $i -lt 30 ]; do\n  echo '{READING}'\n"
        "  head -c 262144 /dev/zero | tr '\\0' w >&2; echo >&2\n"
        "  sleep 0.2; i=$((i+1))\ndone\n"
        "echo 'metrics: last words' >&2\nexit 3\n",
    )

    async def scenario() -> list[Event]:
        fleet = Fleet(
            [Host("b", beta.target, script)],
            interval_s=0.2,
            silence_s=3,
            backoff_initial_s=30,
        )
        seen = _watch(fleet)
        await fleet.start()
        try:
            await _until(lambda: any(e[1] == "stale" for e in seen), 60, "the stream's end")
        finally:
            await fleet.stop()
        return seen

    seen = asyncio.run(scenario())
    stale = [e for e in seen if e[1] == "stale"]
    assert stale[0][2] == "telemetry stream ended: metrics: last words", seen[-3:]


def test_a_stream_that_dies_young_is_restarted_ever_more_slowly(ssh_world: SshWorld) -> None:
    beta = ssh_world.hosts["beta"]
    script = beta.script("once", f"echo '{READING}'\necho 'metrics: crashed' >&2\nexit 1\n")

    async def scenario() -> list[Event]:
        fleet = Fleet(
            [Host("b", beta.target, script)],
            interval_s=0.2,
            backoff_initial_s=0.2,
            backoff_max_s=3.2,
        )
        seen = _watch(fleet)
        await fleet.start()
        try:
            await asyncio.sleep(12)
        finally:
            await fleet.stop()
        return seen

    seen = asyncio.run(scenario())
    ends = [at for at, state, *_ in seen if state == "stale"]
    gaps = [b - a for a, b in itertools.pairwise(ends)]
    # 0.2, 0.4, 0.8, 1.6, 3.2, 3.2 s of backoff (plus each start): a handful of restarts
    # in 12 s, not one a second.
    assert 3 <= len(ends) <= 9, ends
    assert gaps[-1] > gaps[0] + 1.5, gaps
    assert all(e[2] == "telemetry stream ended: metrics: crashed" for e in seen if e[1] == "stale")


def test_a_hung_host_turns_stale_and_comes_back(ssh_world: SshWorld) -> None:
    beta = ssh_world.hosts["beta"]
    # A line that is not UTF-8 first: skipped as a bad line, the connection kept.
    script = beta.script(
        "steady",
        f"printf '\\377\\376 not a reading\\n'\nwhile true; do echo '{READING}'; sleep 0.2; done\n",
    )

    async def scenario() -> list[Event]:
        fleet = Fleet(
            [Host("b", beta.target, script)],
            interval_s=0.2,
            silence_s=2,
            connect_timeout_s=3,
            backoff_initial_s=0.5,
            backoff_max_s=1,
        )
        seen = _watch(fleet)
        await fleet.start()
        try:
            await _until(lambda: fleet.summary("b").state == "up", 60, "b up")
            await asyncio.sleep(1)
            assert fleet.summary("b").state == "up"  # the bad line did not cost the link
            assert fleet.summary("b").parse_errors == 1
            beta.freeze(8)  # no answers; the TCP connection stays open
            await _until(lambda: fleet.summary("b").state == "stale", 15, "b stale")
            assert fleet.summary("b").reason == "no reading for 2 s"
            assert fleet.summary("b").gpus_total == 1  # the last figures stay
            await _until(lambda: fleet.summary("b").state == "up", 40, "b back up")
        finally:
            await fleet.stop()
        return seen

    asyncio.run(scenario())
