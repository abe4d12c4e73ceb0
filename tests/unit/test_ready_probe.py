"""The watcher's /ready probe over real loopback sockets: each answer maps to one state."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from console.server.manager import probe_ready
from console.server.status import Probe


def serve(status: int) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            code = status if self.path == "/ready" else 404
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def ready_server() -> Iterator[str]:
    yield from serve(200)


@pytest.fixture
def loading_server() -> Iterator[str]:
    yield from serve(503)


def test_ready_and_not_ready(ready_server: str, loading_server: str) -> None:
    assert probe_ready(ready_server, 1.0) is Probe.READY
    assert probe_ready(loading_server, 1.0) is Probe.NOT_READY


def test_nothing_listening_is_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert probe_ready(f"http://127.0.0.1:{port}", 1.0) is Probe.REFUSED


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert probe_ready(f"http://127.0.0.1:{port}", 0.2) is Probe.TIMEOUT
