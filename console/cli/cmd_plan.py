"""`ddconsole plan PROFILE --layout L --variant V`: print the exact launch plan."""

from __future__ import annotations

import argparse
from typing import Any

from console.cli.render import print_json, table, wrap_argv


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "plan",
        parents=[common],
        help="resolve profile x layout x variant into argv, env, NUMA binding and warnings",
    )
    parser.add_argument(
        "profile", metavar="PROFILE", help="a profile name (see `ddconsole profiles list`)"
    )
    parser.add_argument(
        "--layout",
        "-l",
        metavar="L",
        help="layout name (default: the only one, or the only single-node one)",
    )
    parser.add_argument("--variant", "-v", metavar="V", help="variant name (default: off)")
    add_placement_flags(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=_plan)


def add_placement_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, metavar="P", help="override the profile's port")
    parser.add_argument(
        "--gpus",
        metavar="IDS",
        type=_gpu_list,
        help="place the layout on these GPUs instead, e.g. 4,5,6,7",
    )


def _gpu_list(text: str) -> tuple[int, ...]:
    """`4,5,6,7` or `4-7` (or both), in the order given; duplicates are kept for the
    placement to name. A range is counted before it is built: more than `MAX_INDEX_SET` ids
    is one line saying the limit, never a MemoryError."""
    from console.core.units import MAX_INDEX_SET

    ordered: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low_text, dash, high_text = part.partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if dash else low
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a GPU list: {text!r} (e.g. 4,5,6,7 or 4-7)"
            ) from None
        if high < low:
            raise argparse.ArgumentTypeError(f"{text}: range {part!r} runs backwards")
        if len(ordered) + high - low + 1 > MAX_INDEX_SET:
            raise argparse.ArgumentTypeError(f"{text}: more than {MAX_INDEX_SET} GPU ids")
        ordered.extend(range(low, high + 1))
    if not ordered:
        raise argparse.ArgumentTypeError("empty GPU list")
    return tuple(ordered)


def choose_layout_variant(loaded: Any, layout: str | None, variant: str | None) -> tuple[str, str]:
    """Fill in an omitted layout (when there is only one) or variant (`off`), else explain."""
    from console.core.errors import UsageError

    layouts = list(loaded.profile.layouts)
    variants = list(loaded.profile.variants)
    # A multi-node layout is never the implicit one: it starts processes on other nodes.
    one_node = [name for name, spec in loaded.profile.layouts.items() if not spec.nodes]
    if layout is None and len(layouts) > 1 and len(one_node) == 1:
        layout = one_node[0]
    if layout is None:
        if len(layouts) != 1:
            raise UsageError(
                f"profile {loaded.name!r} has several layouts; choose one with "
                f"--layout ({', '.join(layouts)})"
            )
        layout = layouts[0]
    if variant is None:
        if "off" not in variants:
            raise UsageError(f"choose a variant with --variant ({', '.join(variants)})")
        variant = "off"
    return layout, variant


def make_plan(
    services: Any,
    profile: str,
    layout: str | None,
    variant: str | None,
    port: int | None,
    gpus: tuple[int, ...] | None = None,
) -> Any:
    from console.profiles.command import build_command
    from console.topology.placement import resolve

    loaded = services.catalog.get(profile)
    layout, variant = choose_layout_variant(loaded, layout, variant)
    command = build_command(loaded, layout, variant, port=port, demo=services.demo, gpus=gpus)
    return resolve(command, services.topology())


def _plan(args: argparse.Namespace) -> int:
    from console.cli.services import Services
    from console.server.gateway_plan import gateway_layout, shown_plans

    services = Services.create(demo=bool(getattr(args, "demo", False)))
    plan = make_plan(services, args.profile, args.layout, args.variant, args.port, args.gpus)
    if args.json:
        data = plan.to_json()
        if plan.nodes:
            from console.topology.nodes import shown_node_plans

            data["node_commands"] = [
                {
                    "node_rank": p.node_rank,
                    "node": p.nodes[p.node_rank],
                    "port": p.port,
                    "argv": p.shown_argv,
                    "command_line": p.command_line,
                }
                for p in shown_node_plans(plan)
            ]
        layout = gateway_layout(plan)
        if layout is not None:
            replicas, gateway = shown_plans(plan, layout)
            data["replica_commands"] = [
                {
                    "replica": index,
                    "gpus": list(p.gpus),
                    "port": p.port,
                    "argv": p.shown_argv,
                    "command_line": p.command_line,
                }
                for index, p in enumerate(replicas)
            ]
            data["gateway_command"] = {
                "port": gateway.port,
                "argv": gateway.shown_argv,
                "command_line": gateway.command_line,
            }
        print_json(data)
        return 0
    print_plan(plan)
    return 0


def print_plan(plan: Any) -> None:
    mode = "  [demo: the simulator runs in place of SGLang]" if plan.demo else ""
    print(f"plan {plan.profile} / {plan.layout} / {plan.variant}{mode}")
    binding = ", ".join(
        f"GPU {gpu} -> node {'?' if node is None else node}"
        for gpu, node in plan.numa_binding.items()
    )
    rows = [
        ["model", f"{plan.model} [{plan.architecture}] served as {plan.served_name}"],
        ["decoding", plan.algorithm if plan.algorithm != "off" else "autoregressive (off)"],
        ["gpus", f"{','.join(map(str, plan.gpus))}  (tp {plan.tp}, dp {plan.dp})"],
        ["numa", f"{plan.numa_policy}: {binding}"],
        ["listen", f"{plan.host}:{plan.port}"],
        ["env", " ".join(f"{k}={v}" for k, v in sorted(plan.shown_env.items()))],
    ]
    if plan.requires:
        rows.append(["needs", plan.requires])
    print(table(["", ""], rows).split("\n", 1)[1])
    if plan.nodes:
        from console.topology.nodes import shown_node_plans

        print(
            f"nodes  {len(plan.nodes)}: {', '.join(plan.nodes)}; rendezvous at "
            f"{plan.dist_init_addr} (the port is chosen again at `up`)"
        )
        for node_plan in shown_node_plans(plan):
            role = "head, serves the API" if node_plan.node_rank == 0 else "joins the head"
            print(f"argv node {node_plan.node_rank} ({plan.nodes[node_plan.node_rank]}, {role})")
            print("  " + wrap_argv(node_plan.shown_argv))
    elif not print_gateway_commands(plan):
        print("argv")
        print("  " + wrap_argv(plan.shown_argv))
    if plan.warnings:
        print("warnings")
        for warning in plan.warnings:
            print(f"  ! {warning.message}")


def print_gateway_commands(plan: Any) -> bool:
    """Each replica's command and the gateway's, for a layout with a gateway; False (and
    nothing printed) for any other layout."""
    from console.server.gateway_plan import gateway_layout, shown_plans

    layout = gateway_layout(plan)
    if layout is None:
        return False
    replicas, gateway = shown_plans(plan, layout)
    print(
        f"replicas  {layout.replicas} behind SGLang's model gateway on port {plan.port}, "
        "registered with it once ready (their ports are chosen again at `up`)"
    )
    for index, replica in enumerate(replicas):
        gpus = ",".join(map(str, replica.gpus))
        print(f"argv replica {index} (GPUs {gpus}, port {replica.port})")
        print("  " + wrap_argv(replica.shown_argv))
    print(f"argv gateway (port {gateway.port})")
    print("  " + wrap_argv(gateway.shown_argv))
    return True


SECURITY_WARNINGS = ("exposed-without-key",)
"""Plan warnings `up` repeats (on stderr) before launching: who else can reach the server."""


def print_security_warnings(plan: Any) -> None:
    """`ddconsole: warning: ...` on stderr for each of the plan's security warnings."""
    import sys

    for warning in plan.warnings:
        if warning.code in SECURITY_WARNINGS:
            print(f"ddconsole: warning: {warning.message}", file=sys.stderr)
