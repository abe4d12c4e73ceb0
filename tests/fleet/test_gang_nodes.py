"""Fast checks of a multi-node layout placed on hosts: `up --nodes` errors name the flag, a
node's plan carries its rank, the gang's hosts and the head's rendezvous address (SGLang's
`--nnodes`, `--node-rank`, `--dist-init-addr`: sglang 0.5.23
srt/arg_groups/fields/parallel.py:32-44), and the supervisor's reason uses gang.py's words."""

from __future__ import annotations

from console.cli.cmd_plan import make_plan
from console.cli.services import Services
from console.fleet.gang_file import GangNode
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
