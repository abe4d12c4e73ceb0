"""A multi-node layout's per-node commands: SGLang's `--nnodes`, `--node-rank` and
`--dist-init-addr` (sglang 0.5.23 srt/arg_groups/fields/parallel.py:32-44), the same on every
node but the rank; the head (rank 0) serves the API, the others join it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from console.profiles.models import LOCAL_NODE

if TYPE_CHECKING:
    from console.topology.placement import Plan

NODE_FLAGS = ("--nnodes", "--node-rank", "--dist-init-addr")


def head_address(node: str, host: str) -> str:
    """The address the other nodes reach the head at: this host's own for `local`, else the
    host's name (the hosts file resolves it)."""
    if node == LOCAL_NODE:
        return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return node


def node_flags(nnodes: int, node_rank: int, dist_init_addr: str) -> list[str]:
    return [
        "--nnodes",
        str(nnodes),
        "--node-rank",
        str(node_rank),
        "--dist-init-addr",
        dist_init_addr,
    ]


def _set_flag(argv: Sequence[str], flag: str, value: str) -> tuple[str, ...]:
    """`argv` with `flag`'s value replaced (the flag appended when absent)."""
    out = list(argv)
    for index, token in enumerate(out[:-1]):
        if token == flag:
            out[index + 1] = value
            return tuple(out)
    return (*out, flag, value)


def node_plans(plan: Plan, dist_port: int, ports: Sequence[int]) -> list[Plan]:
    """One plan per node: node `i` runs with `--node-rank i` on `ports[i]`, every node with
    the head's address at `dist_port`."""
    if not plan.nodes:
        return [plan]
    if len(ports) != len(plan.nodes):
        raise ValueError(f"{len(plan.nodes)} nodes but {len(ports)} ports")
    addr = f"{head_address(plan.nodes[0], plan.host)}:{dist_port}"
    plans = []
    for rank, port in enumerate(ports):
        argv = _set_flag(plan.argv, "--port", str(port))
        argv = _set_flag(argv, "--node-rank", str(rank))
        argv = _set_flag(argv, "--dist-init-addr", addr)
        plans.append(replace(plan, argv=argv, port=port, node_rank=rank, dist_init_addr=addr))
    return plans


def shown_node_plans(plan: Plan) -> list[Plan]:
    """Each node's plan as `ddconsole plan` shows it: the plan's rendezvous port, and on one
    host the nodes after the head on the next ports (`up` picks free ones at launch)."""
    if not plan.nodes:
        return [plan]
    _, _, port = plan.dist_init_addr.rpartition(":")
    ports = [
        plan.port + rank if node == LOCAL_NODE else plan.port
        for rank, node in enumerate(plan.nodes)
    ]
    return node_plans(plan, int(port) if port.isdigit() else 0, ports)


def node_plan(plan: Plan, rank: int, nodes: Sequence[str], dist_init_addr: str, port: int) -> Plan:
    """Node `rank` of a gang whose nodes run on `nodes` (host names of hosts.toml or `local`),
    as that node's host launches it: the flags of `node_plans` for one node only."""
    argv = _set_flag(plan.argv, "--port", str(port))
    argv = _set_flag(argv, "--nnodes", str(len(nodes)))
    argv = _set_flag(argv, "--node-rank", str(rank))
    argv = _set_flag(argv, "--dist-init-addr", dist_init_addr)
    return replace(
        plan,
        argv=argv,
        port=port,
        nodes=tuple(nodes),
        node_rank=rank,
        dist_init_addr=dist_init_addr,
    )
