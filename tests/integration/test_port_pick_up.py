"""`up` moves to the next free port when the profile's is held, and says so; with `--port`
a held port is an error naming the flag. Real simulator processes, ports this test holds."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.core.net import free_port, port_is_free
from tests.conftest import REPO, shipped_profile_on_port


def dd(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args, "--demo"],
        capture_output=True,
        text=True,
        env={**os.environ, "DDCONSOLE_SIM_SPEED": "20"},
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


@pytest.fixture
def held_port(user_profiles: Path) -> Iterator[int]:
    """A port this test listens on, and the qwen3.6-27b profile moved onto it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", free_port()))
        sock.listen()
        port = int(sock.getsockname()[1])
        (user_profiles / "qwen3.6-27b.toml").write_text(
            shipped_profile_on_port("qwen3.6-27b", port), encoding="utf-8"
        )
        yield port
    dd("down", "--all", "--grace", "2")


def test_up_moves_off_a_held_port_and_says_so(held_port: int):
    first = dd("up", "qwen3.6-27b", "--layout", "tp1", "--json")
    assert first.returncode == 0, first.stdout + first.stderr
    status = json.loads(first.stdout)
    said = f"port {held_port} on 127.0.0.1 is in use by pid {os.getpid()} "
    assert said in first.stderr
    assert f"; using port {status['port']}\n" in first.stderr
    assert status["port"] > held_port
    assert not port_is_free(status["port"])  # the simulator listens there

    # The README's second example: the first server is promised its port, so the next
    # launch of the same profile moves past both.
    second = dd("up", "qwen3.6-27b", "--layout", "tp4", "--gpus", "4,5,6,7", "--json")
    assert second.returncode == 0, second.stdout + second.stderr
    moved = json.loads(second.stdout)["port"]
    assert moved not in (held_port, status["port"])
    assert "using port" in second.stderr


def test_a_held_port_given_with_port_is_an_error(held_port: int):
    result = dd("up", "qwen3.6-27b", "--layout", "tp1", "--port", str(held_port))
    assert result.returncode == 2
    assert f"--port {held_port}: port {held_port} on 127.0.0.1 is in use" in result.stderr
    assert "leave out --port" in result.stderr
    assert "Traceback" not in result.stderr
    listed = dd("ps", "--json")
    assert json.loads(listed.stdout) == []  # nothing was launched


def test_next_free_port_skips_promised_and_bound_ports():
    from console.topology.placement import next_free_port

    bound = {5000, 5001, 5003}
    found = next_free_port(
        5000, "127.0.0.1", taken={5002}, port_checker=lambda port, host: port not in bound
    )
    assert found == 5004
    assert next_free_port(65535, "127.0.0.1", port_checker=lambda port, host: False) is None
