"""A multi-node layout as one gang, with real processes: `up kimi-k2.6 --layout tp16-2node`
starts two simulator nodes that handshake through `--dist-init-addr`; the head's readiness
is the gang's; a node killed with SIGKILL stops the other with the reason; a node that never
joins keeps the head from becoming ready until the rendezvous times out, as torch's store
does; `down` stops both. Nothing of the gang stays: no process, no listening port."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from console.core.net import free_port, port_is_free
from console.hw.procs import argv_of, live_processes
from tests.conftest import REPO

pytestmark = pytest.mark.slow

SPEED = "20"
LAYOUT = "tp16-2node"


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", SPEED)
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    monkeypatch.delenv("DDCONSOLE_SIM_DIST_TIMEOUT", raising=False)
    yield
    dd("down", "--all", "--grace", "2")


def dd(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args, "--demo"],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def ps() -> dict[str, dict]:
    result = dd("ps", "--json", "--all")
    assert result.returncode == 0, result.stderr
    return {s["id"]: s for s in json.loads(result.stdout) if not s.get("external")}


def gang_processes(dist_init_addr: str) -> list[int]:
    """Every live process started with this gang's rendezvous address (both nodes' leaders;
    their schedulers die with them)."""
    found = []
    for proc in live_processes():
        argv = argv_of(proc.pid)
        pairs = itertools.pairwise(argv)
        if any(a == "--dist-init-addr" and b == dist_init_addr for a, b in pairs):
            found.append(proc.pid)
    return found


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()]


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def nothing_left(servers: dict[str, dict]) -> None:
    """No process of the gang and none of its ports listening (head, node, rendezvous)."""
    head = next(s for s in servers.values() if s["node_rank"] == 0)
    addr = head["dist_init_addr"]
    wait_for(lambda: not gang_processes(addr), 15, f"the gang's processes ({addr}) to end")
    ports = [s["port"] for s in servers.values()] + [int(addr.rsplit(":", 1)[1])]
    wait_for(lambda: all(port_is_free(p) for p in ports), 10, f"ports {ports} to be free")


def up_gang(port: int, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return dd(
        "up", "kimi-k2.6", "--layout", LAYOUT, "--port", str(port), "--timeout", "45", env=env
    )


def test_up_starts_both_nodes_and_killing_rank_1_stops_the_gang_with_the_reason():
    port = free_port()
    result = up_gang(port)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ready: http://127.0.0.1:{port}" in result.stdout
    servers = ps()
    assert len(servers) == 2
    head_id = f"kimi-k2.6-{LAYOUT}-1"
    node_id = f"{head_id}.node1"
    head, node = servers[head_id], servers[node_id]
    assert head["gang"] == node["gang"] == [head_id, node_id]
    assert (head["node_rank"], node["node_rank"]) == (0, 1)
    assert head["state"] == "ready"
    assert node["state"] == "ready"
    assert head["port"] == port
    assert node["port"] != port
    # Both nodes run, each with its own --node-rank and the head's rendezvous address.
    addr = head["dist_init_addr"]
    assert node["dist_init_addr"] == addr
    leaders = gang_processes(addr)
    assert {head["pid"], node["pid"]} <= set(leaders)
    node_argv = argv_of(node["pid"])
    assert node_argv[node_argv.index("--node-rank") + 1] == "1"
    # Node 1 runs TP ranks 8-15 and no detokenizer; it serves only SGLang's dummy health
    # server (sglang 0.5.23 srt/entrypoints/engine.py:1234-1295, srt/utils/common.py:3624).
    titles = {" ".join(argv_of(pid)) for pid in children(node["pid"])}
    assert titles == {f"sglang::scheduler_TP{rank}" for rank in range(8, 16)}
    head_titles = " ".join(" ".join(argv_of(pid)) for pid in children(head["pid"]))
    assert "scheduler_TP0" in head_titles
    assert "detokenizer" in head_titles
    assert "scheduler_TP8" not in head_titles
    node_url = f"http://127.0.0.1:{node['port']}"
    assert httpx.get(f"{node_url}/health", timeout=5).status_code == 200
    assert httpx.get(f"{node_url}/ready", timeout=5).status_code == 404

    os.kill(node["pid"], signal.SIGKILL)

    def head_failed() -> dict | None:
        state = ps()[head_id]
        return state if state["state"] == "failed" else None

    failed = wait_for(head_failed, 30, "the head to be stopped")
    assert failed["reason"].startswith("node 1 exited 137 (SIGKILL)"), failed["reason"]
    assert failed["failure_kind"] == "gang"
    assert ps()[node_id]["state"] == "failed"
    nothing_left(servers)


def test_down_stops_both_nodes():
    port = free_port()
    result = up_gang(port)
    assert result.returncode == 0, result.stdout + result.stderr
    servers = ps()
    head_id = f"kimi-k2.6-{LAYOUT}-1"
    table = dd("ps").stdout
    assert f"{LAYOUT} [0]" in table
    assert f"{LAYOUT} [1]" in table
    # `up` named both nodes and the rendezvous.
    assert f"{head_id}.node1: node 1 (local)" in result.stdout
    assert "rendezvous at 127.0.0.1:" in result.stdout
    down = dd("down", head_id, "--grace", "10", timeout=90)
    assert down.returncode == 0, down.stdout + down.stderr
    after = ps()
    assert {s["state"] for s in after.values()} == {"stopped"}, after
    assert all(s["reason"] == "stopped by the user" for s in after.values())
    nothing_left(servers)


def test_a_node_that_never_joins_keeps_the_gang_unready_until_the_store_times_out():
    port = free_port()
    env = {"DDCONSOLE_SIM_FAULT": "no-join", "DDCONSOLE_SIM_DIST_TIMEOUT": "4"}
    started = time.monotonic()
    result = up_gang(port, env)
    assert result.returncode == 1, result.stdout + result.stderr
    # The head waited in init the whole timeout, never ready, then failed as torch's store
    # does when clients are missing: 8 of the 16 ranks (the head's own) joined.
    assert time.monotonic() - started >= 4
    assert "ready: " not in result.stdout
    assert "Timed out after 5 seconds waiting for clients. 8/16 clients joined." in result.stdout
    node_id = f"kimi-k2.6-{LAYOUT}-1.node1"
    # The head's failure stops the node that never joined (its waiter hands the gang over).
    wait_for(lambda: ps()[node_id]["state"] == "failed", 30, "the node to be stopped")
    servers = ps()
    head = servers[f"kimi-k2.6-{LAYOUT}-1"]
    node = servers[node_id]
    assert head["state"] == "failed"
    assert "DistStoreError" in head["reason"]
    assert node["state"] == "failed"
    assert node["reason"].startswith("node 0 (the head) exited 137 (SIGKILL)"), node["reason"]
    nothing_left(servers)
    log = Path(head["log_path"]).read_text()
    assert "Init parallel begin." in log
    assert "Init parallel ends." not in log


def test_restart_by_a_nodes_id_restarts_the_gang_under_the_heads_id():
    port = free_port()
    assert up_gang(port).returncode == 0
    before = ps()
    head_id = f"kimi-k2.6-{LAYOUT}-1"
    result = dd("restart", f"{head_id}.node1", "--grace", "10", "--timeout", "45", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    after = ps()
    assert set(after) == set(before)
    assert {s["state"] for s in after.values()} == {"ready"}
    # New processes at a new rendezvous: the old ones are gone.
    assert {s["pid"] for s in after.values()}.isdisjoint({s["pid"] for s in before.values()})
    assert not gang_processes(before[head_id]["dist_init_addr"])
    assert dd("down", "--all", "--grace", "10", timeout=90).returncode == 0
    nothing_left(after)
