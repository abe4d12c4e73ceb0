"""Switch and restart are one implementation (`console/server/actions.py`) under both front
ends: `ddconsole switch|restart` and the TUI's LiveBackend show the same behaviour and the
same progress lines, with real simulator processes (demo mode, free ports).
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from collections.abc import Iterator

import pytest

from console.cli.services import Services
from console.core.net import free_port
from console.tui.backend import ActionRefused
from console.tui.live import LiveBackend
from tests.conftest import run_cli_subprocess

pytestmark = pytest.mark.usefixtures("free_port_profiles")


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Simulators at 20x speed, and nothing left running whatever the test did."""
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    dd("down", "--all", "--grace", "2")


def dd(*args: str, timeout: float = 90) -> tuple[int, str, str]:
    result = run_cli_subprocess(*args, "--demo", env=os.environ.copy(), timeout=timeout)
    return result.returncode, result.stdout, result.stderr


def up_qwen_tp1(port: int) -> str:
    code, out, err = dd(
        "up", "qwen3.6-27b", "-l", "tp1", "-v", "off", "--port", str(port), "--json"
    )
    assert code == 0, out + err
    return str(json.loads(out)["id"])


def states() -> dict[str, str]:
    code, out, err = dd("ps", "--json")
    assert code == 0, err
    return {s["id"]: s["state"] for s in json.loads(out)}


def live_backend() -> LiveBackend:
    return Services.create(demo=True).live_backend(recordings=None)


class PortSquatter:
    """Takes `port` the moment its server lets go of it and holds it: a stopped server's
    port still in use, as a straggling child or another program would keep it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock: socket.socket | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._grab, daemon=True)
        self._thread.start()

    def _grab(self) -> None:
        while not self._stop.is_set():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", self.port))
                sock.listen()
            except OSError:
                sock.close()
                self._stop.wait(0.005)
                continue
            self.sock = sock
            return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        if self.sock is not None:
            self.sock.close()


def shape(line: str) -> str:
    """A progress line with its numbers, ids and paths blanked, to compare wording."""
    line = re.sub(r"/\S+", "PATH", line)
    line = re.sub(r"qwen3\.6-27b-tp1-\d+", "ID", line)
    return re.sub(r"\d+(\.\d+)?", "N", line).strip()


@pytest.mark.parametrize("front_end", ["cli", "tui"])
def test_switch_refuses_to_launch_while_the_old_port_is_held(front_end: str) -> None:
    old_port = free_port()
    old = up_qwen_tp1(old_port)
    squatter = PortSquatter(old_port)
    try:
        if front_end == "cli":
            code, out, _ = dd(
                "switch", "qwen3.6-27b", "-l", "tp1", "-v", "off", "--port", str(free_port()),
                "--yes", "--grace", "5",
            )  # fmt: skip
            assert code == 1, out
            said = out
        else:
            backend = live_backend()
            plan = backend.plan("qwen3.6-27b", "tp1", "off", replacing=old)
            lines: list[str] = []
            with pytest.raises(ActionRefused) as refused:
                backend.switch(old, plan, lines.append)
            said = "\n".join([*lines, refused.value.message])
        assert f"stopping {old}" in said
        assert f"{old} still holds port {old_port} after stopping; not launching" in said
        assert squatter.sock is not None, "the test never held the port"
        # Nothing was launched: the old server is the only one, and it is stopped.
        assert states() == {old: "stopped"}
    finally:
        squatter.close()


def test_restart_shows_the_same_progress_in_both_front_ends() -> None:
    server = up_qwen_tp1(free_port())
    code, out, err = dd("restart", server, "--grace", "5")
    assert code == 0, out + err
    cli_lines = [shape(line) for line in out.splitlines() if line.strip()]

    tui_lines: list[str] = []
    view = live_backend().restart(server, tui_lines.append)
    assert view.state == "ready"
    tui = [shape(line) for line in tui_lines]

    # The stop, the relaunch (pid, port, GPUs, log) and the load milestones read the same;
    # each front end then says "ready" its own way.
    expected = [line for line in cli_lines if not line.startswith("ready:")]
    assert tui[: len(expected)] == expected
    assert any(line.startswith("ID: pid N, port N, GPUs N, log PATH") for line in expected)
    assert any(line.startswith("stopped ID (SIGTERM") for line in expected)
    assert states() == {server: "ready"}
