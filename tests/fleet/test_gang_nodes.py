"""Fast checks of a multi-node layout placed on hosts: `up --nodes` errors name the flag, a
node's plan carries its rank, the gang's hosts and the head's rendezvous address (SGLang's
`--nnodes`, `--node-rank`, `--dist-init-addr`: sglang 0.5.23
srt/arg_groups/fields/parallel.py:32-44), the supervisor's reason uses gang.py's words, and
the gang file keeps the request `restart` starts again (an older file without it loads, and
its restart is refused with what to do)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from console.cli.cmd_plan import make_plan
from console.cli.services import Services
from console.core.paths import StatePaths
from console.fleet.gang_file import GangFile, GangNode, gang_path, load, save
from console.fleet.gang_up import request_of
from console.fleet.gang_watch import ended_on_its_own, reason_for
from console.topology.nodes import node_plan


def test_nodes_flag_needs_as_many_hosts_as_the_layout_has_nodes(cli) -> None:
    result = cli("--demo", "up", "kimi-k2.6", "--layout", "tp16-2node", "--nodes", "alpha")
    assert result.code == 2
    assert "--nodes: layout 'tp16-2node' runs 2 nodes; name 2 hosts (got 1)" in result.err


def test_nodes_flag_on_a_single_node_layout_is_refused(cli) -> None:
    result = cli("--demo", "up", "kimi-k2.6", "--layout", "tp8", "--nodes", "a,b")
    assert result.code == 2
    assert "--nodes: layout 'tp8' runs on one node" in result.err


def test_a_node_on_an_unknown_host_is_named_with_the_known_ones(cli) -> None:
    result = cli("--demo", "up", "kimi-k2.6", "--layout", "tp16-2node", "--nodes", "gamma,beta")
    assert result.code == 2
    assert "--nodes: node 'gamma' is no host of hosts.toml (known: local)" in result.err


def test_node_plan_carries_rank_hosts_and_the_heads_address() -> None:
    plan = make_plan(Services.create(demo=True), "kimi-k2.6", "tp16-2node", None, 41234)
    node = node_plan(plan, 1, ["alpha", "beta"], "10.0.0.2:29500", 45678)
    argv = list(node.argv)
    assert argv[argv.index("--nnodes") + 1] == "2"
    assert argv[argv.index("--node-rank") + 1] == "1"
    assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.2:29500"
    assert argv[argv.index("--port") + 1] == "45678"
    assert argv.count("--node-rank") == 1
    assert (node.node_rank, node.nodes, node.port) == (1, ("alpha", "beta"), 45678)
    assert node.dist_init_addr == "10.0.0.2:29500"


def test_the_supervisors_reason_is_gang_pys() -> None:
    killed = {"state": "failed", "exit_code": -9, "ended_wall": 1.0, "failure_kind": "signal"}
    assert reason_for(GangNode(1, "beta", "g.node1"), killed) == (
        "node 1 exited 137 (SIGKILL); the gang was stopped"
    )
    assert reason_for(GangNode(0, "alpha", "g"), {"state": "failed", "exit_code": 1}) == (
        "node 0 (the head) exited with status 1; the gang was stopped"
    )
    assert ended_on_its_own(killed)
    # A node the gang itself stopped is no cause; a running one has not ended.
    assert not ended_on_its_own({**killed, "failure_kind": "gang"})
    assert not ended_on_its_own({"state": "ready"})
    assert not ended_on_its_own(None)


# A gang file as `up kimi-k2.6 --layout tp16-2node --nodes alpha,beta` wrote it before the
# request was kept: no variant, port or gpus.
OLD_FILE: dict[str, Any] = {
    "id": "kimi-k2.6-tp16-2node-1",
    "profile": "kimi-k2.6",
    "layout": "tp16-2node",
    "demo": True,
    "nodes": [
        {"rank": 0, "host": "alpha", "id": "kimi-k2.6-tp16-2node-1"},
        {"rank": 1, "host": "beta", "id": "kimi-k2.6-tp16-2node-1.node1"},
    ],
    "created_wall": 1780000000.5,
    "head_url": "http://127.0.0.1:30000",
    "watcher_pid": 4242,
    "stop_requested_wall": None,
    "stop_reason": None,
    "ended_wall": None,
    "failure": None,
    "notes": [],
}


def test_the_gang_file_keeps_the_request_and_restart_starts_it_again(tmp_path: Path) -> None:
    gang = GangFile.from_json({**OLD_FILE, "variant": "off", "port": 30011, "gpus": [0, 1, 2, 3]})
    path = tmp_path / "gangs" / f"{gang.id}.json"
    save(path, gang)
    again = load(path)
    assert again == gang
    assert json.loads(path.read_text())["gpus"] == [0, 1, 2, 3]
    request = request_of(again, path, 90.0)
    assert (request.profile, request.layout, request.variant) == ("kimi-k2.6", "tp16-2node", "off")
    assert (request.nodes, request.port, request.gpus) == (("alpha", "beta"), 30011, (0, 1, 2, 3))
    assert (request.demo, request.timeout_s, request.wait) == (True, 90.0, True)
    # A request without --port or --gpus keeps them unset: the head picks as `up` does.
    path.write_text(json.dumps({**OLD_FILE, "variant": "off", "port": None, "gpus": None}))
    bare = request_of(load(path), path, None)
    assert (bare.port, bare.gpus, bare.timeout_s) == (None, None, None)


def test_an_older_gang_file_loads_and_its_restart_is_refused(cli) -> None:
    paths = StatePaths.for_mode(True)
    path = gang_path(paths, OLD_FILE["id"])
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(OLD_FILE))
    gang = load(path)
    assert (gang.variant, gang.port, gang.gpus) == (None, None, None)
    assert load(path).to_json() == {**OLD_FILE, "variant": None, "port": None, "gpus": None}
    # By a unique prefix, as `down` takes it; nothing is stopped and the file stays.
    result = cli("--demo", "restart", "kimi-k2.6-tp16")
    assert result.code == 1
    assert f"{path}: this multi-node server's file was written before it kept the request" in (
        result.err
    )
    assert (
        "`ddconsole down kimi-k2.6-tp16-2node-1`, then `ddconsole up kimi-k2.6 --layout "
        "tp16-2node --nodes alpha,beta` again"
    ) in result.err
    assert load(path) == gang
