"""The gateway watcher against a small real HTTP server that plays both a ready replica and a
gateway which accepts a registration (202) but lists it only later, as smg registers in the
background: a registration counts once `GET /workers` lists it and is sent again when it stays
unlisted; a pass that raises is written to stderr and the watch goes on."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from console.core.paths import StatePaths
from console.hw.procs import process_info
from console.server import gateway_watch
from console.server.gateway import GatewayGroup, save_group, watch_log_path
from console.server.gateway_watch import ReplicaState, Watcher
from console.server.records import Records, ServerRecord
from tests.unit.test_gateway_layout import _plan

GATEWAY = "g-1"
REPLICA = "g-1.replica0"


@dataclass
class FakeGateway:
    """What the fake server saw and will list."""

    posts: list[Any] = field(default_factory=list)
    listed: bool = False
    port: int = 0


@pytest.fixture
def fake() -> Iterator[FakeGateway]:
    state = FakeGateway()

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: object = None) -> None:
            raw = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            if self.path == "/ready":
                self._send(200)
            elif self.path == "/workers":
                url = f"http://127.0.0.1:{state.port}"
                workers = [{"id": "w0", "url": url}] if state.listed else []
                self._send(200, {"workers": workers})
            else:
                self._send(404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            state.posts.append(json.loads(self.rfile.read(length)))
            self._send(202, {"status": "accepted"})

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def _records(root: Path, port: int) -> Records:
    """A gateway and one replica, both at the fake server's port, both led by this process."""
    paths = StatePaths(root)
    paths.ensure()
    records = Records(paths)
    me = process_info(os.getpid())
    assert me is not None
    for sid in (GATEWAY, REPLICA):
        record = ServerRecord(
            sid, replace(_plan(), port=port), str(root / f"{sid}.log"), time.time(), os.getpid()
        )
        records.save(record)
        records.spawn_path(sid).write_text(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "start_ticks": me.start_ticks,
                    "waiter_pid": os.getpid(),
                    "spawned_wall": time.time(),
                }
            )
        )
    save_group(paths, GatewayGroup(GATEWAY, (REPLICA,)))
    return records


def test_a_registration_counts_once_listed_and_is_sent_again_when_not(
    tmp_path: Path, fake: FakeGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    _records(tmp_path, fake.port)
    watcher = Watcher(tmp_path, GATEWAY)
    assert watcher.step()
    assert watcher.states[REPLICA] is ReplicaState.REGISTERING
    assert len(fake.posts) == 1
    # Accepted (202) but not listed: still not registered, not sent twice at once.
    assert watcher.step()
    assert watcher.states[REPLICA] is ReplicaState.REGISTERING
    assert len(fake.posts) == 1
    # Unlisted past the confirmation time: back to waiting, and sent again.
    monkeypatch.setattr(gateway_watch, "CONFIRM_S", 0.0)
    assert watcher.step()
    assert watcher.states[REPLICA] is ReplicaState.WAITING
    assert watcher.step()
    assert len(fake.posts) == 2
    fake.listed = True
    assert watcher.step()
    assert watcher.states[REPLICA] is ReplicaState.REGISTERED
    log = (tmp_path / f"{GATEWAY}.log").read_text()
    assert "not listed by the gateway" in log
    assert f"registered {REPLICA}" in log


def test_a_pass_that_raises_is_logged_and_the_watch_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(gateway_watch, "TICK_S", 0.01)
    passes: list[int] = []

    class Flaky(Watcher):
        def step(self) -> bool:
            passes.append(1)
            if len(passes) <= 2:
                raise RuntimeError("boom in a pass")
            return len(passes) < 4

    Flaky(tmp_path, GATEWAY).run()
    assert len(passes) == 4
    err = capsys.readouterr().err
    assert err.count("RuntimeError: boom in a pass") == 2
    assert "pass failed (2 in a row)" in err


def test_the_watchers_log_sits_next_to_the_gateways() -> None:
    assert watch_log_path("/s/logs/g-1.20260101.log") == Path("/s/logs/g-1.20260101.watch.log")
