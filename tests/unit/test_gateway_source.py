"""The gateway's `/engine_metrics` as each replica's samples, read over a real loopback
socket: each `worker_addr` becomes its replica's ServerSample (rates from two reads), a
worker no replica names is named by its address, and a server without the route is
unavailable with the reason."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import httpx
import pytest

from console.telemetry.gateway_source import GatewaySource, split_by_worker
from console.telemetry.keys import SourceId
from console.telemetry.prometheus import parse
from console.telemetry.samples import ServerSample, SourceState

A = "http://127.0.0.1:41101"
B = "http://127.0.0.1:41102"


def engine_metrics(a_decode: float, b_decode: float) -> str:
    """Two simulator workers' series as smg 1.13.0's /engine_metrics labels them."""
    common = 'engine_type="unified",model_name="qwen3.6-27b"'
    lines = ["# TYPE sglang:realtime_tokens_total counter"]
    for worker, decode in ((A, a_decode), (B, b_decode)):
        lines.append(
            f'sglang:realtime_tokens_total{{{common},mode="decode",worker_addr="{worker}"}} '
            f"{decode}"
        )
    lines.append("# TYPE sglang:generation_tokens_total counter")
    for worker, decode in ((A, a_decode), (B, b_decode)):
        lines.append(
            f'sglang:generation_tokens_total{{{common},is_streaming="true",'
            f'worker_addr="{worker}"}} {decode}'
        )
    lines.append("# TYPE sglang:num_running_reqs gauge")
    lines.append(f'sglang:num_running_reqs{{{common},worker_addr="{A}"}} 5')
    lines.append(f'sglang:num_running_reqs{{{common},worker_addr="{B}"}} 2')
    return "\n".join(lines) + "\n"


class _Server(http.server.ThreadingHTTPServer):
    bodies: list[str]
    path_served = "/engine_metrics"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        if self.path != self.server.path_served:
            self.send_error(404)
            return
        body = (
            self.server.bodies.pop(0) if len(self.server.bodies) > 1 else self.server.bodies[0]
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def gateway() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.bodies = [engine_metrics(100, 40), engine_metrics(400, 140)]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_split_by_worker_drops_the_worker_label() -> None:
    parts = split_by_worker(parse(engine_metrics(1, 2)))
    assert sorted(parts) == [A, B]
    assert parts[B].total("sglang:realtime_tokens_total", mode="decode") == 2
    assert all(
        "worker_addr" not in labels for labels, _ in parts[A].samples["sglang:num_running_reqs"]
    )


async def test_each_worker_is_its_replicas_samples(gateway: _Server) -> None:
    url = f"http://127.0.0.1:{gateway.server_address[1]}"
    async with httpx.AsyncClient() as client:
        source = GatewaySource("g-1", url, client, {A: "g-1.replica0"})
        first = await source.poll(10.0)
        second = await source.poll(12.0)
    # The gateway's own status, then one per worker read through it.
    assert [s.state for s in second.statuses] == [SourceState.OK] * 3
    assert second.statuses[0].name == SourceId.server("g-1")
    assert SourceId.server("g-1.replica0") in [s.name for s in second.statuses[1:]]
    assert len(first.samples) == 2
    by_source = {s.source: s for s in second.samples if isinstance(s, ServerSample)}
    replica = by_source[SourceId.server("g-1.replica0")]
    other = by_source[SourceId.url(B)]
    assert replica.decode_tok_s == 150.0
    assert replica.finished_tok_s == 150.0
    assert replica.running == 5
    assert other.decode_tok_s == 50.0
    assert other.server_id == "127.0.0.1:41102"


async def test_a_server_without_engine_metrics_is_unavailable(gateway: _Server) -> None:
    gateway.path_served = "/elsewhere"
    url = f"http://127.0.0.1:{gateway.server_address[1]}"
    async with httpx.AsyncClient() as client:
        result = await GatewaySource("g-1", url, client, {}).poll(1.0)
    assert result.samples == []
    assert result.statuses[0].state is SourceState.UNAVAILABLE
    assert "/engine_metrics" in (result.statuses[0].reason or "")
