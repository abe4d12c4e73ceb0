"""A gateway layout's commands: one server per replica and SGLang's model gateway in front.

A layout with `replicas = N` and a `[layouts.NAME.gateway]` table resolves to one plan for
the whole (what `plan` names and `up` is given); this module splits it into each replica's
own plan (its share of the GPUs, its own port) and the gateway's (`smg launch` on the
profile's port). The replicas are registered with the gateway once ready
(console.server.gateway), not named on its command line.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from console.core.errors import ConsoleError, UsageError
from console.profiles.loader import load_profile_file
from console.profiles.models import GatewaySpec, Layout
from console.topology.placement import Plan

GATEWAY_ENV = "DDCONSOLE_GATEWAY"
"""Set in the gateway's environment: marks its plan as the gateway's (probed on /readiness)."""
REPLICA_ENV = "DDCONSOLE_GATEWAY_REPLICA"
"""Set in a replica's environment to its index: its plan is one replica's, not the layout's."""
READY_PATH = "/readiness"
"""smg's readiness route: 200 once it has a healthy worker (`smg launch`, 1.13.0)."""


def gateway_layout(plan: Plan) -> Layout | None:
    """The plan's layout when it puts replicas behind a gateway, read from its profile file;
    None for any other layout (or a profile that can no longer be read)."""
    if is_gateway(plan) or REPLICA_ENV in plan.env or plan.nodes:
        return None
    try:
        loaded = load_profile_file(Path(plan.profile_path), plan.profile)
    except (ConsoleError, OSError, ValueError):
        return None
    layout = loaded.profile.layouts.get(plan.layout)
    if layout is None or layout.gateway is None:
        return None
    return layout


def is_gateway(plan: Plan) -> bool:
    return plan.env.get(GATEWAY_ENV) == "1"


def smg_executable(name: str) -> str:
    """`name` as given when it is a path; else the one next to the console's interpreter
    (the venv `pip install smg` put it in), else the one on PATH, else `name` (preflight
    then says it is missing)."""
    if "/" in name:
        return name
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    return shutil.which(name) or name


def _set_flag(
    argv: Sequence[str], flag: str, values: Sequence[str], count: int = 1
) -> tuple[str, ...]:
    """`argv` with the `count` values after `flag` replaced by `values` (unchanged without
    the flag)."""
    out = list(argv)
    if flag not in out:
        return tuple(out)
    index = out.index(flag)
    out[index + 1 : index + 1 + count] = list(values)
    return tuple(out)


def replica_plans(plan: Plan, layout: Layout, ports: Sequence[int]) -> list[Plan]:
    """Replica `i` runs on its share of the plan's GPUs on `ports[i]`, otherwise the plan's
    own command (its NUMA binding reduced to its GPUs)."""
    if len(ports) != layout.replicas:
        raise ValueError(f"{layout.replicas} replicas but {len(ports)} ports")
    plans = []
    for index, (gpus, port) in enumerate(zip(layout.replica_gpus(plan.gpus), ports, strict=True)):
        binding = {gpu: plan.numa_binding.get(gpu) for gpu in gpus}
        argv = _set_flag(plan.argv, "--port", [str(port)])
        # placement passes one --numa-node value per visible GPU of the whole layout
        argv = _set_flag(argv, "--numa-node", [str(binding[g]) for g in gpus], len(plan.gpus))
        env = {
            **plan.env,
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)),
            REPLICA_ENV: str(index),
        }
        plans.append(
            replace(
                plan,
                argv=argv,
                env=env,
                gpus=gpus,
                numa_binding=binding,
                numa_nodes=tuple(sorted({n for n in binding.values() if n is not None})),
                port=port,
            )
        )
    return plans


def gateway_argv(spec: GatewaySpec, host: str, port: int, metrics_port: int) -> tuple[str, ...]:
    """`smg launch` on `host:port` with its Prometheus listener on `metrics_port` (smg's
    default, 29000 on every interface, would collide between gateways)."""
    return (
        smg_executable(spec.smg),
        "launch",
        "--host",
        host,
        "--port",
        str(port),
        "--policy",
        spec.policy,
        "--prometheus-host",
        host,
        "--prometheus-port",
        str(metrics_port),
        *spec.args,
    )


def gateway_plan(plan: Plan, layout: Layout, metrics_port: int) -> Plan:
    """The gateway's own plan: no GPUs, the profile's host and port."""
    spec = layout.gateway
    if spec is None:
        raise UsageError(f"layout {plan.layout!r} has no gateway")
    return replace(
        plan,
        argv=gateway_argv(spec, plan.host, plan.port, metrics_port),
        env={GATEWAY_ENV: "1"},
        gpus=(),
        numa_binding={},
        numa_nodes=(),
        warnings=(),
        api_key_env=None,
        admin_api_key_env=None,
    )


def shown_plans(plan: Plan, layout: Layout) -> tuple[list[Plan], Plan]:
    """Each replica's plan and the gateway's as `ddconsole plan` shows them: the replicas on
    the ports after the gateway's, its metrics listener after those (`up` picks free ones)."""
    ports = [plan.port + 1 + i for i in range(layout.replicas)]
    return replica_plans(plan, layout, ports), gateway_plan(
        plan, layout, plan.port + 1 + layout.replicas
    )
