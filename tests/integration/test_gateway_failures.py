"""The failure paths of DP replicas behind the real `smg`: a gateway that cannot start, replicas
that all fail, a gateway that dies under its running replicas, and a whole-group restart one of
whose launches is refused. Whatever ends, nothing of the group is left running or holding a port.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.core.net import free_port, port_is_free
from tests.conftest import REPO
from tests.integration.test_gateway import (
    LAYOUT,
    PROFILE,
    dd,
    fast_sim,  # noqa: F401 (autouse: skips without smg, stops everything after)
    gateway_workers,
    processes_naming,
    ps,
    wait_for,
)

pytestmark = pytest.mark.slow

GATEWAY_ID = f"{PROFILE}-{LAYOUT}-1"
REPLICAS = [f"{GATEWAY_ID}.replica{i}" for i in range(2)]


def _group_file() -> Path:
    state = Path(os.environ["XDG_STATE_HOME"]) / "ddconsole-demo"
    return state / "gateways" / f"{GATEWAY_ID}.json"


def _nothing_left(ports: list[int]) -> None:
    """No process listens on, or is launched with, any of `ports`."""
    wait_for(
        lambda: not any(processes_naming(f"--port {p}") for p in ports),
        20,
        f"no process on ports {ports}",
    )
    wait_for(lambda: all(port_is_free(p) for p in ports), 10, f"ports {ports} free")


def _profile_with_gateway_args(user_profiles: Path, args: str) -> None:
    """The shipped profile with extra `smg launch` arguments for the dp2-gateway layout."""
    text = (REPO / "profiles" / f"{PROFILE}.toml").read_text(encoding="utf-8")
    marker = f"[layouts.{LAYOUT}.gateway]\n"
    assert marker in text
    (user_profiles / f"{PROFILE}.toml").write_text(
        text.replace(marker, f"{marker}args = {args}\n"), encoding="utf-8"
    )


def test_a_gateway_that_cannot_start_stops_its_replicas(user_profiles: Path) -> None:
    _profile_with_gateway_args(user_profiles, '["--bogus-flag"]')
    port = free_port()
    up = dd("up", PROFILE, "--layout", LAYOUT, "--port", str(port), "--timeout", "60")
    assert up.returncode == 1, up.stdout + up.stderr
    assert "FAILED" in up.stdout, up.stdout
    assert "bogus-flag" in up.stdout, up.stdout
    servers = ps()
    # Both replicas were stopped with the gateway's reason, not left holding their GPUs.
    for rid in REPLICAS:
        assert servers[rid]["state"] in ("stopped", "failed"), servers
    assert "gateway" in (servers[REPLICAS[0]]["reason"] or ""), servers
    replica_ports = [servers[rid]["port"] for rid in REPLICAS]
    _nothing_left(replica_ports)

    # `down` of the ended gateway forgets the whole group.
    assert _group_file().is_file()
    down = dd("down", GATEWAY_ID)
    assert down.returncode == 0, down.stdout + down.stderr
    assert not set(ps()) & {GATEWAY_ID, *REPLICAS}
    assert not _group_file().exists()


def test_every_replica_failing_fails_the_start_with_their_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DDCONSOLE_SIM_FAULT", "crash-at-load")
    port = free_port()
    started = time.monotonic()
    up = dd("up", PROFILE, "--layout", LAYOUT, "--port", str(port), "--timeout", "120")
    took = time.monotonic() - started
    assert up.returncode == 1, up.stdout + up.stderr
    assert "keeps starting" not in up.stdout
    assert "every replica ended" in up.stdout, up.stdout
    assert all(rid in up.stdout for rid in REPLICAS), up.stdout
    # Ended well before the timeout: the replicas crash within seconds.
    assert took < 100, took
    servers = ps()
    assert servers[GATEWAY_ID]["state"] in ("stopped", "failed"), servers
    _nothing_left([port])


def test_a_replica_that_dies_while_starting_is_named_when_the_gateway_is_ready() -> None:
    port = free_port()
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "console",
            "up",
            PROFILE,
            "--layout",
            LAYOUT,
            "--port",
            str(port),
            "--timeout",
            "60",
            "--demo",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    # replica1 killed as soon as its process exists: long before it could be ready.
    spawn = _group_file().parent.parent / "servers" / f"{REPLICAS[1]}.spawn.json"
    wait_for(spawn.is_file, 30, "replica1's process")
    os.kill(json.loads(spawn.read_text())["pid"], signal.SIGKILL)
    out, _ = up.communicate(timeout=90)
    assert up.returncode == 0, out
    assert f"! replica {REPLICAS[1]} ended, the gateway routes without it" in out, out
    servers = ps()
    assert gateway_workers(port) == [servers[REPLICAS[0]]["url"]]
    # `ps` marks the gateway degraded, naming the replica it routes without.
    assert servers[GATEWAY_ID]["degraded"] == f"degraded: 1 of 2 replicas ended ({REPLICAS[1]})"
    assert "degraded" not in servers[REPLICAS[0]]


def test_an_ended_gateway_restarts_and_its_down_stops_the_replicas() -> None:
    port = free_port()
    up = dd("up", PROFILE, "--layout", LAYOUT, "--port", str(port), "--timeout", "60")
    assert up.returncode == 0, up.stdout + up.stderr
    # The gateway's line names no GPUs: the replicas hold them.
    gateway_line = rf"(?m)^{re.escape(GATEWAY_ID)}: pid \d+, port {port}, GPUs none, log "
    assert re.search(gateway_line, up.stdout), up.stdout
    servers = ps()
    urls = sorted(servers[rid]["url"] for rid in REPLICAS)
    wait_for(lambda: sorted(gateway_workers(port)) == urls, 15, "both registered")

    # The gateway dies under its running replicas: restart relaunches the whole.
    os.kill(servers[GATEWAY_ID]["pid"], signal.SIGKILL)
    wait_for(lambda: ps()[GATEWAY_ID]["state"] in ("stopped", "failed"), 15, "gateway ended")
    assert all(ps()[rid]["state"] == "ready" for rid in REPLICAS)
    again = dd("restart", GATEWAY_ID, "--timeout", "60")
    assert again.returncode == 0, again.stdout + again.stderr
    wait_for(lambda: sorted(gateway_workers(port)) == urls, 15, "both in the new gateway")

    # It dies again: `down` of the ended gateway stops both replicas and forgets the group.
    servers = ps()
    replica_ports = [servers[rid]["port"] for rid in REPLICAS]
    os.kill(servers[GATEWAY_ID]["pid"], signal.SIGKILL)
    wait_for(lambda: ps()[GATEWAY_ID]["state"] in ("stopped", "failed"), 15, "gateway ended")
    assert _group_file().is_file()
    down = dd("down", GATEWAY_ID, "--grace", "5")
    assert down.returncode == 0, down.stdout + down.stderr
    assert not set(ps()) & {GATEWAY_ID, *REPLICAS}
    assert not _group_file().exists()
    _nothing_left(replica_ports)


def test_a_refused_relaunch_stops_what_it_started() -> None:
    port = free_port()
    up = dd("up", PROFILE, "--layout", LAYOUT, "--port", str(port), "--timeout", "60")
    assert up.returncode == 0, up.stdout + up.stderr
    servers = ps()
    replica_ports = [servers[rid]["port"] for rid in REPLICAS]
    down = dd("down", GATEWAY_ID, "--grace", "5")
    assert down.returncode == 0, down.stdout + down.stderr
    _nothing_left([port, *replica_ports])

    # A stray listener on replica1's port: its relaunch is refused after replica0's started.
    with socket.socket() as stray:
        stray.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        stray.bind(("127.0.0.1", replica_ports[1]))
        stray.listen()
        again = dd("restart", GATEWAY_ID, "--timeout", "60")
    assert again.returncode != 0, again.stdout + again.stderr
    assert REPLICAS[1] in again.stdout + again.stderr
    servers = ps()
    assert all(servers[sid]["state"] in ("stopped", "failed") for sid in servers), servers
    _nothing_left([port, replica_ports[0]])
