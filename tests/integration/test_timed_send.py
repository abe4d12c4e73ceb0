"""The trace replay's send thread against a real simulator: a request goes out at its time
even while the event loop is busy, never before it, and its response is read like the
ordinary client's (both stream formats, an HTTP error, a refused connection)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.bench.client import Endpoint, RequestResult, encode_body, make_client, run_request
from console.bench.timed_send import TimedSender, can_send_timed
from console.bench.workload import Prompt
from console.core.net import free_port
from tests.simproc import SMALL, SimProcess, running_sim

SPEED = 20.0
PROMPT = Prompt(input_ids=tuple(range(100, 164)), text=None, input_len=64, output_len=12)


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with running_sim(SMALL, tmp_path_factory.mktemp("sim"), speed=SPEED) as process:
        yield process


def _sender(url: str, endpoint: Endpoint) -> TimedSender:
    return TimedSender(url, endpoint, headers={}, time_scale=SPEED, read_timeout_s=60.0)


async def _send_at(sender: TimedSender, endpoint: Endpoint, prompt: Prompt, delay_s: float):
    """Send `prompt` `delay_s` from now; (result, due wall time, wall times `on_sent` saw)."""
    seen: list[float] = []
    due = time.perf_counter() + delay_s
    due_wall = time.time() + delay_s
    payload = sender.payload(encode_body(endpoint, prompt, None))
    return await sender.send(payload, due, seen.append), due_wall, seen


@pytest.mark.parametrize("endpoint", [Endpoint.GENERATE, Endpoint.CHAT])
def test_a_timed_send_is_timed_like_the_client(sim: SimProcess, endpoint: Endpoint):
    async def go() -> tuple[RequestResult, float, list[float]]:
        async with _sender(sim.url, endpoint) as sender:
            return await _send_at(sender, endpoint, PROMPT, 0.05)

    result, due_wall, seen = asyncio.run(go())
    assert result.error is None, result.error
    assert result.output_tokens == PROMPT.output_len
    if endpoint is Endpoint.GENERATE:
        assert result.prompt_tokens == len(PROMPT.input_ids or ())
    assert result.ttft_s is not None
    assert 0 < result.ttft_s <= (result.e2e_s or 0)
    assert result.chunks >= 1
    assert result.finish_reason == "length"
    # Never early; `on_sent` saw the same send time the result carries.
    assert result.send_wall >= due_wall - 0.001
    assert seen == [result.send_wall]


def test_the_send_goes_out_while_the_loop_is_busy(sim: SimProcess):
    """Once the request is handed to the send thread, the loop's thread runs Python from
    before the send time until 0.6 s after it; the request still goes out on time (sent from
    the loop it would be at least 0.6 s late). The bound is loose for a loaded machine; what
    it rules out is waiting for the loop."""
    busy_s = 0.6

    async def go() -> tuple[RequestResult, float, list[float]]:
        async with _sender(sim.url, Endpoint.GENERATE) as sender:
            handed = asyncio.Event()
            submit = sender._thread.submit

            def submitted(job: Any) -> None:
                submit(job)
                handed.set()

            sender._thread.submit = submitted  # type: ignore[method-assign]
            sending = asyncio.create_task(_send_at(sender, Endpoint.GENERATE, PROMPT, 0.3))
            await handed.wait()
            end = time.perf_counter() + 0.3 + busy_s
            while time.perf_counter() < end:  # the loop's thread busy in Python
                pass
            return await sending

    switch = sys.getswitchinterval()
    result, due_wall, seen = asyncio.run(go())
    assert sys.getswitchinterval() == switch  # restored once the level's sender closed
    assert result.error is None, result.error
    assert due_wall - 0.001 <= result.send_wall < due_wall + busy_s / 2
    assert seen == [result.send_wall]


def test_an_http_error_and_a_refused_connection_are_the_results_errors(
    sim: SimProcess, tmp_path: Path
):
    async def go(url: str, body: bytes) -> RequestResult:
        async with _sender(url, Endpoint.GENERATE) as sender:
            return await sender.send(sender.payload(body), time.perf_counter(), lambda _: None)

    bad = asyncio.run(go(sim.url, b"{not json"))
    assert (bad.error or "").startswith("HTTP 4"), bad.error
    refused = asyncio.run(go(f"http://127.0.0.1:{free_port()}", b"{}"))
    assert refused.error == "connection refused"


def test_cancelled_before_its_time_nothing_is_sent(sim: SimProcess):
    before = len(sim.stats()["requests"])

    async def go() -> list[float]:
        seen: list[float] = []
        async with _sender(sim.url, Endpoint.GENERATE) as sender:
            payload = sender.payload(encode_body(Endpoint.GENERATE, PROMPT, None))
            task = asyncio.create_task(sender.send(payload, time.perf_counter() + 0.3, seen.append))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        return seen

    assert asyncio.run(go()) == []
    time.sleep(0.3)
    assert len(sim.stats()["requests"]) == before


def test_only_plain_http_goes_through_the_thread():
    assert can_send_timed("http://gpu-7.example:8080")
    assert not can_send_timed("https://gpu-7.example:443")
    assert can_send_timed("http://h:1", {"Authorization": "Bearer k"})
    assert not can_send_timed("http://h:1", {"Authorization": "Bearer k\r\nX-Evil: 1"})


def test_a_long_native_stream_reads_as_the_ordinary_client_reads_it(sim: SimProcess):
    """Late events of the native stream repeat the whole text so far; read off the raw
    connection they count the same events and tokens as through httpx."""
    prompt = Prompt(input_ids=tuple(range(7, 71)), text=None, input_len=64, output_len=400)

    async def go() -> tuple[RequestResult, RequestResult]:
        async with _sender(sim.url, Endpoint.GENERATE) as sender:
            timed, _, _ = await _send_at(sender, Endpoint.GENERATE, prompt, 0.0)
        async with make_client(1, timeout_s=60) as client:
            plain = await run_request(client, sim.url, Endpoint.GENERATE, prompt, time_scale=SPEED)
        return timed, plain

    timed, plain = asyncio.run(go())
    assert timed.error is None, timed.error
    assert plain.error is None, plain.error
    assert timed.output_tokens == plain.output_tokens == 400
    assert timed.chunks == plain.chunks
    assert timed.finish_reason == plain.finish_reason == "length"
