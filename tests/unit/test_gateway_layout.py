"""A layout with replicas behind a gateway: what the profile accepts, how `plan` splits it
into each replica's command and the gateway's, and the group file that ties them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from console.core.paths import StatePaths
from console.hw.simulated import SimulatedGpuBackend
from console.profiles.command import build_command
from console.profiles.loader import load_profile_file
from console.profiles.models import GatewaySpec, Layout
from console.server.gateway import GatewayGroup, group_of, replica_id, save_group
from console.server.gateway_plan import (
    GATEWAY_ENV,
    gateway_layout,
    is_gateway,
    shown_plans,
)
from console.topology.discover import discover
from console.topology.model import Topology
from console.topology.placement import Plan, resolve
from tests.conftest import REPO

QWEN = REPO / "profiles" / "qwen3.6-27b.toml"


def test_replicas_need_a_gateway_and_the_gpus_of_every_replica() -> None:
    with pytest.raises(ValidationError, match="needs a gateway"):
        Layout(tp=1, replicas=2, gpus=(0, 1))
    with pytest.raises(ValidationError, match=r"2 replicas x tp \(2\) x dp \(1\) = 4 GPUs"):
        Layout(tp=2, replicas=2, gpus=(0, 1), gateway=GatewaySpec())
    with pytest.raises(ValidationError, match="leave out nodes"):
        Layout(tp=2, gpus=(0, 1), nodes=("local", "local"), gateway=GatewaySpec())
    layout = Layout(tp=2, replicas=2, gpus=(4, 5, 6, 7), gateway=GatewaySpec())
    assert layout.replica_gpus() == [(4, 5), (6, 7)]
    assert layout.replica_gpus((0, 1, 2, 3)) == [(0, 1), (2, 3)]


def test_gateway_flags_the_plan_sets_are_refused_in_args() -> None:
    with pytest.raises(ValidationError, match=r"--port is set by the plan"):
        GatewaySpec(args=("--port=8000",))
    with pytest.raises(ValidationError, match=r"--policy is set by the plan"):
        GatewaySpec(args=("--policy", "random"))
    with pytest.raises(ValidationError):
        GatewaySpec(policy="manual")
    assert GatewaySpec(args=("--log-level", "warn")).args == ("--log-level", "warn")


def _topology() -> Topology:
    backend = SimulatedGpuBackend(None)
    return discover(backend, backend.numa_nodes)


def _plan(layout: str = "dp2-gateway") -> Plan:
    loaded = load_profile_file(QWEN, "qwen3.6-27b")
    command = build_command(loaded, layout, "off", port=40100, demo=True)
    return resolve(command, _topology(), port_checker=None)


def test_plan_splits_into_one_command_per_replica_and_the_gateways() -> None:
    plan = _plan()
    layout = gateway_layout(plan)
    assert layout is not None
    assert layout.replicas == 2
    replicas, gateway = shown_plans(plan, layout)
    assert [r.gpus for r in replicas] == [(0,), (1,)]
    assert [r.port for r in replicas] == [40101, 40102]
    for replica in replicas:
        argv = list(replica.argv)
        assert argv[argv.index("--port") + 1] == str(replica.port)
        assert replica.env["CUDA_VISIBLE_DEVICES"] == str(replica.gpus[0])
        # One --numa-node value per visible GPU of this replica, not of the whole layout.
        after = argv[argv.index("--numa-node") + 1 :]
        values = after[: next((i for i, a in enumerate(after) if a.startswith("--")), None)]
        assert values == [str(replica.numa_binding[replica.gpus[0]])]
        assert not is_gateway(replica)
        # A replica's own plan (relaunched by `restart`) is one server, not the layout again.
        assert gateway_layout(replica) is None
    argv = list(gateway.argv)
    assert Path(argv[0]).name == "smg"
    assert argv[1] == "launch"
    assert argv[argv.index("--port") + 1] == "40100"
    assert argv[argv.index("--policy") + 1] == "cache_aware"
    assert argv[argv.index("--prometheus-port") + 1] == "40103"
    assert gateway.gpus == ()
    assert gateway.env == {GATEWAY_ENV: "1"}
    assert is_gateway(gateway)
    # The gateway's own plan is no gateway layout to split again.
    assert gateway_layout(gateway) is None


def test_other_layouts_are_not_gateway_layouts() -> None:
    assert gateway_layout(_plan("dp2")) is None


def test_group_file_names_the_gateway_and_its_replicas(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    group = GatewayGroup("g-1", (replica_id("g-1", 0), replica_id("g-1", 1)))
    save_group(paths, group)
    assert group_of(paths, "g-1") == group
    assert group_of(paths, "g-1.replica1") == group
    assert group_of(paths, "g-1.replica7") is None
    assert group_of(paths, "other-1") is None
    (tmp_path / "gateways" / "g-2.json").write_text("{not json")
    assert group_of(paths, "g-2") is None
