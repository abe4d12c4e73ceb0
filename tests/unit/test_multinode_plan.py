"""Multi-node layouts: validation as SGLang 0.5.23 validates its flags, one command per node,
the simulator's own checks and rendezvous, and how a gang names the node that failed."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from console.core.net import free_port
from console.profiles.models import Layout
from console.server.gang import exit_text, failure_reason
from console.server.records import ExitInfo
from console.sim import nodes as sim_nodes
from console.sim.options import parse
from console.sim.rendezvous import RendezvousError, host_rendezvous, join_rendezvous
from console.topology.nodes import node_plans, shown_node_plans


def flag(argv: tuple[str, ...] | list[str], name: str) -> str:
    return argv[list(argv).index(name) + 1]


def test_a_layout_over_two_nodes_counts_each_nodes_gpus():
    layout = Layout(tp=16, gpus=tuple(range(8)), nodes=("local", "local"))
    assert layout.nnodes == 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        # sglang 0.5.23 srt/arg_groups/validation_hook.py:179-181
        ({"tp": 12, "gpus": tuple(range(4)), "nodes": ("a", "b", "c", "d", "e")}, "divisible"),
        # :199-202: no multi-node DP replicas
        ({"tp": 8, "dp": 2, "gpus": tuple(range(8)), "nodes": ("a", "b")}, "dp > 1"),
        ({"tp": 16, "gpus": tuple(range(4)), "nodes": ("a", "b")}, "on each node x 2 nodes"),
        ({"tp": 8, "gpus": tuple(range(8)), "nodes": ("a",)}, "one node"),
        ({"tp": 16, "gpus": tuple(range(8)), "nodes": ("a", "bad host")}, "pattern"),
    ],
)
def test_bad_multinode_layouts_say_what_is_wrong(fields, message):
    with pytest.raises(ValidationError, match=message):
        Layout(**fields)


def test_plan_renders_one_command_per_node(cli):
    result = cli("plan", "kimi-k2.6", "--layout", "tp16-2node", "--demo", "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["nodes"] == ["local", "local"]
    commands = data["node_commands"]
    assert [c["node_rank"] for c in commands] == [0, 1]
    addr = data["dist_init_addr"]
    assert addr.startswith("127.0.0.1:")
    for rank, command in enumerate(commands):
        argv = command["argv"]
        assert flag(argv, "--nnodes") == "2"
        assert flag(argv, "--node-rank") == str(rank)
        assert flag(argv, "--dist-init-addr") == addr
        assert flag(argv, "--tp-size") == "16"
    # On one host the second node listens on its own port.
    assert commands[0]["port"] != commands[1]["port"]
    text = cli("plan", "kimi-k2.6", "--layout", "tp16-2node", "--demo")
    assert "argv node 0 (local, head, serves the API)" in text.out
    assert "argv node 1 (local, joins the head)" in text.out


def test_the_implicit_layout_is_never_the_multi_node_one(cli):
    result = cli("plan", "kimi-k2.6", "--demo", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["layout"] == "tp8"


def test_node_plans_set_rank_port_and_address(cli):
    from console.cli.cmd_plan import make_plan
    from console.cli.services import Services

    plan = make_plan(Services.create(demo=True), "kimi-k2.6", "tp16-2node", None, free_port())
    plans = node_plans(plan, 41234, [plan.port, plan.port + 7])
    assert [p.node_rank for p in plans] == [0, 1]
    assert plans[1].port == plan.port + 7
    assert flag(plans[1].argv, "--port") == str(plan.port + 7)
    assert all(flag(p.argv, "--dist-init-addr") == "127.0.0.1:41234" for p in plans)
    assert plans[0].argv.count("--node-rank") == 1
    assert len(shown_node_plans(plan)) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tp-size", "6", "--nnodes", "4", "--dist-init-addr", "h:1"], "divisible"),
        (["--tp-size", "8", "--dp-size", "2", "--nnodes", "2", "--dist-init-addr", "h:1"], "data"),
        (["--tp-size", "8", "--nnodes", "2"], "--dist-init-addr"),
        (["--tp-size", "8", "--nnodes", "2", "--node-rank", "2", "--dist-init-addr", "h:1"], "out"),
    ],
)
def test_the_simulator_refuses_what_sglang_asserts(argv, message):
    options = parse(["--model-path", "m", *argv])
    lines = sim_nodes.check_args(options)
    assert lines is not None
    assert lines[-1].startswith("AssertionError: ")
    assert message in lines[-1]


def test_the_simulator_accepts_a_good_multi_node_launch():
    argv = ["--model-path", "m", "--tp-size", "16", "--nnodes", "2", "--dist-init-addr", "h:1"]
    options = parse(argv)
    assert sim_nodes.check_args(options) is None
    assert "--nnodes" not in options.unmodeled


def test_dist_timeout_flag_wins_over_the_sim_option_over_torchs_default():
    assert sim_nodes.dist_timeout(7, {"DDCONSOLE_SIM_DIST_TIMEOUT": "3"}) == 7
    assert sim_nodes.dist_timeout(None, {"DDCONSOLE_SIM_DIST_TIMEOUT": "3"}) == 3
    assert sim_nodes.dist_timeout(None, {}) == 600


def test_rendezvous_joins_every_node_and_reports_a_lost_peer():
    async def scenario() -> tuple[int, bool]:
        port = free_port()
        head_task = asyncio.create_task(
            host_rendezvous("127.0.0.1", port, 3, 10, world=24, per_node=8)
        )
        joins = [join_rendezvous("127.0.0.1", port, rank, 3, 10) for rank in (1, 2)]
        head, *others = await asyncio.gather(head_task, *joins)
        assert sorted(head.peers) == [1, 2]
        lost: list[tuple[int, bool]] = []
        watch = asyncio.create_task(head.watch(lambda rank, clean: lost.append((rank, clean))))
        others[1].close()  # node 2 dies
        await asyncio.wait_for(watch, 5)
        # A clean stop reaches the remaining node as SHUTDOWN.
        seen: list[bool] = []
        node_watch = asyncio.create_task(others[0].watch(lambda rank, clean: seen.append(clean)))
        head.shutdown()
        head.close()
        await asyncio.wait_for(node_watch, 5)
        assert seen == [True]
        for gang in (head, *others):
            gang.close()
        await asyncio.sleep(0.05)  # let the transports finish closing
        return lost[0]

    assert asyncio.run(scenario()) == (2, False)


def test_a_missing_node_times_out_with_torchs_store_error():
    async def scenario() -> str:
        port = free_port()
        try:
            await host_rendezvous("127.0.0.1", port, 2, 0.5, world=16, per_node=8)
        except RendezvousError as exc:
            return str(exc)
        raise AssertionError("no timeout")

    text = asyncio.run(scenario())
    assert text.startswith("torch.distributed.DistStoreError: Timed out after")
    assert text.endswith("8/16 clients joined.")


def test_a_gang_failure_names_the_node_and_its_signal():
    assert exit_text(ExitInfo(-9, 0.0)) == "137 (SIGKILL)"
    assert exit_text(ExitInfo(1, 0.0)) == "with status 1"
    assert failure_reason(1, ExitInfo(-9, 0.0)).startswith("node 1 exited 137 (SIGKILL)")
    assert failure_reason(0, ExitInfo(-9, 0.0)).startswith("node 0 (the head) exited")
