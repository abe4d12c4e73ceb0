"""Issue 21's second acceptance line across hosts: `up kimi-k2.6 --layout tp16-2node --nodes
alpha,beta` starts node 0 on the fake SSH host alpha and node 1 on beta (each a managed
server in its own host's state, started by that host's ddconsole), and is ready when the
head is; SIGKILL of rank 1 makes the supervisor on the console host stop the head with the
reason (`node 1 exited 137 (SIGKILL)`); nothing is left on either host. A node that cannot
start stops the started ones; `down` of the gang here stops every node on its host; `restart`
of the gang here starts every node again under the same ids."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator

import pytest

from console.core.net import free_port
from console.core.paths import StatePaths
from console.fleet.gang_file import GangFile, gang_ids, gang_path, load, watcher_alive
from console.hw.procs import is_running
from tests.fleet.conftest import SshWorld, write_hosts_toml
from tests.fleet.gangworld import dd, finish, nothing_left, servers_on, start, wait_for

pytestmark = pytest.mark.slow

LAYOUT = "tp16-2node"
GANG = f"kimi-k2.6-{LAYOUT}-1"
NODE1 = f"{GANG}.node1"


@pytest.fixture
def gang_world(ssh_world: SshWorld) -> Iterator[SshWorld]:
    write_hosts_toml(ssh_world)
    yield ssh_world
    paths = StatePaths.for_mode(True)
    for gang in gang_ids(paths):
        path = gang_path(paths, gang)
        pid = load(path).watcher_pid
        if watcher_alive(pid, path):
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
    # This host first (its `down --all` stops its gangs on every host), then the others.
    dd("down", "--all", "--grace", "2", timeout=60)
    args = [("--host", host, "down", "--all", "--grace", "2") for host in ("alpha", "beta")]
    for proc, one in [(start(*one), one) for one in args]:
        finish(proc, one, 60)


def up_gang(port: int, nodes: str = "alpha,beta") -> tuple[int, str, str]:
    return dd(
        "up", "kimi-k2.6", "--layout", LAYOUT, "--nodes", nodes, "--port", str(port),
        "--timeout", "60", "--json",
    )  # fmt: skip


def test_up_across_two_hosts_and_killing_rank_1_stops_the_gang(gang_world: SshWorld) -> None:
    port = free_port()
    code, out, err = up_gang(port)
    assert code == 0, err
    head = json.loads(out)
    assert (head["id"], head["state"], head["host"], head["port"]) == (GANG, "ready", "alpha", port)
    assert f"ready: http://127.0.0.1:{port} (on alpha)" in err

    # Each node is a managed server of its own host: the head on alpha, node 1 on beta.
    alpha, beta = servers_on("alpha"), servers_on("beta")
    assert list(alpha) == [GANG]
    assert list(beta) == [NODE1]
    node = beta[NODE1]
    assert alpha[GANG]["state"] == "ready"
    assert node["state"] == "ready"
    assert alpha[GANG]["gang"] == node["gang"] == [GANG, NODE1]
    assert (alpha[GANG]["node_rank"], node["node_rank"]) == (0, 1)
    assert alpha[GANG]["nodes"] == node["nodes"] == ["alpha", "beta"]
    # The head's rendezvous is at alpha's address (the SSH link's peer), reached by node 1.
    addr = alpha[GANG]["dist_init_addr"]
    assert addr.startswith("127.0.0.2:")
    assert node["dist_init_addr"] == addr
    # Every host's state is its own: the console host ran no server itself.
    code, out, err = dd("ps", "--json", "--all")
    assert code == 0, err
    assert [s for s in json.loads(out) if not s.get("external")] == []
    gang = load(gang_path(StatePaths.for_mode(True), GANG))
    assert [(n.rank, n.host, n.id) for n in gang.nodes] == [(0, "alpha", GANG), (1, "beta", NODE1)]
    assert watcher_alive(gang.watcher_pid)

    pids = [alpha[GANG]["pid"], node["pid"]]
    os.kill(node["pid"], signal.SIGKILL)

    def head_failed() -> dict | None:
        # The head may fail on its own first (its collective with node 1 breaks); the
        # supervisor then records the cause on it, and that is what its state says.
        state = servers_on("alpha")[GANG]
        return state if state["failure_kind"] == "gang" else None

    failed = wait_for(head_failed, 45, "the head on alpha to be stopped by the gang")
    assert failed["reason"] == "node 1 exited 137 (SIGKILL); the gang was stopped"
    assert failed["failure_kind"] == "gang"
    assert servers_on("beta")[NODE1]["state"] == "failed"
    rendezvous = int(addr.rsplit(":", 1)[1])
    nothing_left(
        addr, [("127.0.0.1", port), ("127.0.0.1", node["port"]), ("127.0.0.2", rendezvous)], pids
    )

    # The supervisor recorded why and ended.
    def ended() -> GangFile | None:
        found = load(gang_path(StatePaths.for_mode(True), GANG))
        return found if found.ended_wall is not None else None

    gang = wait_for(ended, 15, "the gang file to record the end")
    assert gang.failure == "node 1 exited 137 (SIGKILL); the gang was stopped"
    wait_for(lambda: not watcher_alive(gang.watcher_pid), 15, "the supervisor to end")
    code, out, err = dd("ps")
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith(GANG))
    assert "0:alpha, 1:beta" in row
    assert "failed" in row
    assert "node 1 exited 137 (SIGKILL)" in row

    # `down` of the ended gang here forgets it on every host.
    code, out, err = dd("down", GANG)
    assert code == 0, err
    assert f"forgot {GANG}" in out
    assert servers_on("alpha") == {}
    assert servers_on("beta") == {}
    assert gang_ids(StatePaths.for_mode(True)) == []


def test_a_node_that_cannot_start_leaves_nothing(gang_world: SshWorld) -> None:
    # beta's GPUs are held by a server of its own: node 1 is refused there by preflight.
    blocker = free_port()
    code, _, err = dd(
        "--host", "beta", "up", "qwen3.6-27b", "--layout", "tp1", "--port", str(blocker),
        "--no-wait",
    )  # fmt: skip
    assert code == 0, err
    port = free_port()
    code, _out, err = up_gang(port)
    assert code != 0
    assert "node 1 did not start on beta" in err
    # The head had started on alpha: it was stopped, with the reason, and nothing of it runs.
    head = servers_on("alpha")[GANG]
    assert head["state"] in ("failed", "stopped")
    assert head["reason"].startswith("node 1 did not start on beta"), head["reason"]
    nothing_left(head["dist_init_addr"], [("127.0.0.1", port)], [head["pid"]])
    assert NODE1 not in servers_on("beta")
    gang = load(gang_path(StatePaths.for_mode(True), GANG))
    assert gang.failure is not None
    assert gang.watcher_pid is None


def test_a_head_on_this_host_and_down_of_the_gang_here(gang_world: SshWorld) -> None:
    # `local` is a node host too: the head runs here, node 1 on beta joins it at this host's
    # address on its link to beta.
    port = free_port()
    code, out, err = up_gang(port, "local,beta")
    assert code == 0, err
    assert json.loads(out)["host"] == "local"
    head, node = servers_on("local")[GANG], servers_on("beta")[NODE1]
    assert (head["state"], node["state"]) == ("ready", "ready")
    assert node["dist_init_addr"] == head["dist_init_addr"]
    watcher = load(gang_path(StatePaths.for_mode(True), GANG)).watcher_pid
    assert watcher is not None
    code, out, err = dd("down", GANG, "--grace", "5")
    assert code == 0, err
    assert f"stopped {GANG} on local, beta" in out
    assert servers_on("local")[GANG]["state"] == "stopped"
    assert servers_on("local")[GANG]["reason"] == "stopped by the user"
    assert servers_on("beta")[NODE1]["state"] in ("stopped", "failed")
    addr, _, rendezvous = head["dist_init_addr"].rpartition(":")
    ports = [("127.0.0.1", port), ("127.0.0.1", node["port"]), (addr, int(rendezvous))]
    nothing_left(head["dist_init_addr"], ports, [head["pid"], node["pid"], watcher])


def test_restart_of_the_gang_keeps_its_ids_on_both_hosts(gang_world: SshWorld) -> None:
    port = free_port()
    code, _out, err = up_gang(port)
    assert code == 0, err
    old_pids = started_pids(err)
    old_watcher = load(gang_path(StatePaths.for_mode(True), GANG)).watcher_pid

    # By a unique prefix, as `down` takes it: every node stops, then starts again.
    code, out, err = dd("restart", "kimi-k2.6-tp16", "--grace", "5", "--timeout", "60", "--json")
    assert code == 0, err
    head = json.loads(out)
    assert (head["id"], head["state"], head["host"], head["port"]) == (GANG, "ready", "alpha", port)
    assert f"ready: http://127.0.0.1:{port} (on alpha)" in err
    alpha, beta = both_hosts()
    assert (list(alpha), list(beta)) == ([GANG], [NODE1])
    assert (alpha[GANG]["state"], beta[NODE1]["state"]) == ("ready", "ready")
    pids = [alpha[GANG]["pid"], beta[NODE1]["pid"]]
    assert started_pids(err) == pids
    assert not set(pids) & set(old_pids)
    assert not [p for p in old_pids if is_running(p, None)]
    assert beta[NODE1]["dist_init_addr"] == alpha[GANG]["dist_init_addr"]
    gang = load(gang_path(StatePaths.for_mode(True), GANG))
    assert [(n.rank, n.host, n.id) for n in gang.nodes] == [(0, "alpha", GANG), (1, "beta", NODE1)]
    assert (gang.stop_requested_wall, gang.ended_wall, gang.failure) == (None, None, None)
    assert not watcher_alive(old_watcher)
    assert watcher_alive(gang.watcher_pid)

    code, _out, err = dd("down", GANG, "--grace", "5")
    assert code == 0, err
    addr = alpha[GANG]["dist_init_addr"]
    ports = [("127.0.0.1", port), ("127.0.0.1", beta[NODE1]["port"])]
    rendezvous = ("127.0.0.2", int(addr.rsplit(":", 1)[1]))
    nothing_left(addr, [*ports, rendezvous], [*pids, gang.watcher_pid or 0])


def started_pids(err: str) -> list[int]:
    """The nodes' pids, in rank order, from what `up` or `restart` said as each started."""
    return [int(pid) for pid in re.findall(r": node \d+ on \w+, pid (\d+),", err)]


def both_hosts() -> tuple[dict[str, dict], dict[str, dict]]:
    """servers_on("alpha") and servers_on("beta"), asked at once."""
    procs = [start("--host", host, "ps", "--json", "--all") for host in ("alpha", "beta")]
    found = []
    for proc in procs:
        code, out, err = finish(proc, ("ps",), 60)
        assert code == 0, err
        found.append({s["id"]: s for s in json.loads(out) if not s.get("external")})
    return found[0], found[1]
