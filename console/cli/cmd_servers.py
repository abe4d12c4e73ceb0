"""`ddconsole up|ps|down|restart|logs|switch`: the server lifecycle verbs."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from console.cli.cmd_plan import add_placement_flags
from console.cli.render import print_json, table

if TYPE_CHECKING:
    # Types only: `ddconsole --help` does not import the server manager.
    from pathlib import Path

    from console.cli.services import Services
    from console.fleet.gang_up import GangStarted
    from console.server.external import ExternalServer
    from console.server.manager import ServerManager
    from console.server.status import ServerStatus


PROFILE_HELP = "a profile name (see `ddconsole profiles list`)"
LAYOUT_HELP = "layout name (default: the only one, if there is one)"
VARIANT_HELP = "speculative variant name (default: off)"
GRACE_HELP = "seconds between SIGTERM and SIGKILL (default 30, SGLang drains)"


EXACT_HELP = (
    "the id exactly, never a prefix of another (a caller acting on the server it was shown)"
)


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    up = verbs.add_parser("up", parents=[common], help="launch a server from a profile plan")
    up.add_argument("profile", metavar="PROFILE", help=PROFILE_HELP)
    up.add_argument("--layout", "-l", metavar="L", help=LAYOUT_HELP)
    up.add_argument("--variant", "-v", metavar="V", help=VARIANT_HELP)
    add_placement_flags(up)
    up.add_argument("--no-wait", action="store_true", help="return once the process runs")
    up.add_argument("--timeout", type=float, metavar="S", help="give up waiting after S s")
    up.add_argument("--json", action="store_true", help="the server's status as JSON")
    up.add_argument(
        "--nodes",
        metavar="H0,H1",
        help="a multi-node layout's hosts of hosts.toml (or `local`), head first, instead of "
        "the layout's `nodes`: each node is started on its host over SSH",
    )
    _add_gang_node_flags(up)
    up.set_defaults(handler=_up)

    ps = verbs.add_parser(
        "ps",
        parents=[common],
        help="managed servers and their state, and SGLang servers ddconsole did not start",
    )
    ps.add_argument(
        "--all",
        "-a",
        action="store_true",
        help="also the stopped servers folded away (ended longer ago than the "
        "fold_stopped_after setting, default 1h)",
    )
    ps.add_argument("--json", action="store_true", help="one object per server")
    ps.set_defaults(handler=_ps)

    down = verbs.add_parser("down", parents=[common], help="stop servers (or forget ended ones)")
    down.add_argument("ids", nargs="*", metavar="ID", help="server ids or unique prefixes")
    down.add_argument(
        "--all", action="store_true", help="every managed server (never an external one)"
    )
    down.add_argument(
        "--external",
        action="store_true",
        help="stop the named SGLang servers ddconsole did not start (ids from `ps`: ext-PID)",
    )
    down.add_argument(
        "--yes", "-y", action="store_true", help="do not ask before stopping an external server"
    )
    down.add_argument(
        "--grace",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds between SIGTERM and SIGKILL (default 30, SGLang drains)",
    )
    down.add_argument("--json", action="store_true", help="one result object per server")
    down.add_argument("--exact", action="store_true", help=EXACT_HELP)
    # Internal: the gang supervisor on the console host (console.fleet.gang_watch) stops this
    # host's node of a gang because a node on another host ended, recording why.
    down.add_argument(
        "--gang-failure",
        metavar="TEXT",
        help="internal (the console host's gang supervisor): stop this host's node of a "
        "multi-node server because a node elsewhere ended, recording TEXT as why",
    )
    # Internal: `down` of a gang's node on its host, sent by the console host's `down` of
    # the gang; never the gang itself again (a head on the console host shares its id).
    down.add_argument(
        "--gang-node",
        action="store_true",
        help="internal (the console host's `down` of a multi-node server): stop only this "
        "host's node, never the gang it belongs to",
    )
    down.add_argument(
        "--stop-reason",
        metavar="TEXT",
        help="internal (with --gang-node): record TEXT as why the node was stopped "
        "(`restart` of a multi-node server)",
    )
    down.set_defaults(handler=_down)

    restart = verbs.add_parser(
        "restart",
        parents=[common],
        help="stop and relaunch a server (a multi-node server on other hosts: every node, "
        "under the same ids)",
    )
    restart.add_argument(
        "id", metavar="ID", help="a server id or a unique prefix (or a multi-node server's)"
    )
    restart.add_argument("--grace", type=float, default=30.0, metavar="S", help=GRACE_HELP)
    restart.add_argument("--timeout", type=float, metavar="S", help="give up waiting after S s")
    restart.add_argument("--json", action="store_true", help="the server's status as JSON")
    restart.add_argument("--exact", action="store_true", help=EXACT_HELP)
    restart.set_defaults(handler=_restart)

    logs = verbs.add_parser("logs", parents=[common], help="a server's log")
    logs.add_argument("id", metavar="ID", help="a server id or a unique prefix")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    logs.add_argument(
        "-n", "--lines", type=int, default=50, metavar="N", help="last N lines (default 50)"
    )
    logs.add_argument(
        "--json",
        action="store_true",
        help='{"server": STATUS, "lines": [...]}; with -f, JSON lines: the status, then '
        '{"line": ...} per line, then {"end": STATE, "reason": ...}',
    )
    logs.add_argument("--exact", action="store_true", help=EXACT_HELP)
    logs.set_defaults(handler=_logs)

    switch = verbs.add_parser(
        "switch",
        parents=[common],
        help="stop the servers on the GPUs a plan needs, then launch it and wait for ready",
    )
    switch.add_argument("profile", metavar="PROFILE", help=PROFILE_HELP)
    switch.add_argument("--layout", "-l", metavar="L", help=LAYOUT_HELP)
    switch.add_argument("--variant", "-v", metavar="V", help=VARIANT_HELP)
    add_placement_flags(switch)
    switch.add_argument("--yes", "-y", action="store_true", help="do not ask before stopping")
    switch.add_argument("--grace", type=float, default=30.0, metavar="S", help=GRACE_HELP)
    switch.add_argument("--timeout", type=float, metavar="S", help="give up waiting after S s")
    switch.add_argument("--json", action="store_true", help="the new server's status as JSON")
    switch.set_defaults(handler=_switch)


def _add_gang_node_flags(up: argparse.ArgumentParser) -> None:
    """Internal flags of `up`: the console host starts node I of a gang on this host
    (console.fleet.gang_up); `--dist-init-addr ADDR:0` on the head picks a free port here."""
    internal = "internal (sent by the console host that runs `up --nodes`): "
    up.add_argument("--gang-id", metavar="ID", help=internal + "start one node of gang ID here")
    up.add_argument("--node-rank", type=int, metavar="I", help=internal + "the node's rank")
    up.add_argument("--gang-nodes", metavar="H0,H1", help=internal + "the gang's hosts")
    up.add_argument(
        "--dist-init-addr",
        metavar="ADDR",
        help=internal + "the head's HOST:PORT (PORT 0 on the head: a free one here)",
    )


def _services(args: argparse.Namespace) -> Services:
    from console.cli.services import Services

    return Services.create(demo=bool(getattr(args, "demo", False)))


def _say(args: argparse.Namespace, text: str) -> None:
    """Progress goes to stderr when stdout carries JSON."""
    stream = sys.stderr if getattr(args, "json", False) else sys.stdout
    print(text, file=stream, flush=True)


def _say_diagnosis(args: argparse.Namespace, status: ServerStatus) -> None:
    """How far a failed server got and the lines that say why: `ddconsole diagnose`'s code."""
    from console.core.errors import ConsoleError
    from console.server.diagnose import diagnose_file

    excerpt = status.failure.excerpt if status.failure else ()
    try:
        diagnosis = diagnose_file(
            status.record.log_path,
            returncode=status.exit.returncode if status.exit else None,
            stop_requested=status.record.stop_requested_wall is not None,
        )
    except ConsoleError:  # the log is gone or unreadable: the status's excerpt is all there is
        diagnosis = None
    if diagnosis is not None:
        reached = diagnosis.reached
        if reached is not None:
            when = reached.timestamp or f"line {reached.line_number}"
            _say(args, f"  reached: {reached.label} ({when})")
        if diagnosis.failure is not None:
            excerpt = diagnosis.failure.excerpt
            if diagnosis.failure_line_number is not None:
                _say(args, f"  at line {diagnosis.failure_line_number} of the log:")
    for line in excerpt:
        _say(args, f"  | {line}")


def _outcome(args: argparse.Namespace, status: ServerStatus, *, waited: bool = True) -> int:
    """Print where a launched server ended up; the exit status says whether it is ready."""
    record = status.record
    if args.json:
        print_json(status.to_json())
    if status.state.value == "ready":
        _say(args, f"ready: {record.url}")
        return 0
    if status.state.terminal:
        _say(args, f"FAILED: {status.reason}")
        _say_diagnosis(args, status)
        _say(args, f"  (full log: {_dd()} logs {record.id}{' --demo' if record.plan.demo else ''})")
        return 1
    if not waited:
        return 0
    _say(
        args,
        f"not ready after {args.timeout:.0f} s (state {status.state.value}); it keeps "
        f"starting in the background: `{_dd()} down {record.id}` stops it",
    )
    return 1


def _dd() -> str:
    """`ddconsole` as a hint here names it (`ddconsole --host NAME` when relayed)."""
    from console.core.via_host import ddconsole_command

    return ddconsole_command()


def _up(args: argparse.Namespace) -> int:
    from console.cli.cmd_plan import make_plan, print_security_warnings
    from console.server import actions

    if args.gang_id is not None:
        return _up_node(args)
    services = _services(args)
    plan = make_plan(services, args.profile, args.layout, args.variant, args.port, args.gpus)
    plan = _with_nodes(args, plan)
    if any(node != "local" for node in plan.nodes):
        return _up_across_hosts(args, services, plan)
    manager = services.manager()
    if args.port is None:
        plan = _port_for_up(args, services, manager, plan)
    _say(args, f"up {plan.profile} / {plan.layout} / {plan.variant}")
    print_security_warnings(plan)
    if args.port is not None:
        _port_for_up(args, services, manager, plan)
    record = actions.launch(manager, plan, on_event=lambda text: _say(args, text))
    if args.no_wait:
        return _outcome(args, manager.status(record.id, probe=False), waited=False)
    status = actions.wait_ready(
        manager, record.id, timeout=args.timeout, on_event=lambda text: _say(args, text)
    )
    return _outcome(args, status)


def _with_nodes(args: argparse.Namespace, plan: Any) -> Any:
    """The plan with `--nodes` as its nodes (as many as the layout has)."""
    from dataclasses import replace

    from console.core.errors import UsageError

    if not args.nodes:
        return plan
    nodes = tuple(n.strip() for n in args.nodes.split(",") if n.strip())
    if not plan.nodes:
        raise UsageError(
            f"--nodes: layout {plan.layout!r} runs on one node; choose a multi-node layout"
        )
    if len(nodes) != len(plan.nodes):
        raise UsageError(
            f"--nodes: layout {plan.layout!r} runs {len(plan.nodes)} nodes; name "
            f"{len(plan.nodes)} hosts (got {len(nodes)})"
        )
    return replace(plan, nodes=nodes)


def _up_across_hosts(args: argparse.Namespace, services: Services, plan: Any) -> int:
    """A multi-node layout with nodes on other hosts: each node started on its host."""
    from console.fleet import gang_up

    where = "--nodes" if args.nodes else f"layout {plan.layout!r} nodes"
    _say(args, f"up {plan.profile} / {plan.layout} / {plan.variant} on {', '.join(plan.nodes)}")
    request = gang_up.GangRequest(
        profile=plan.profile,
        layout=plan.layout,
        variant=plan.variant,
        nodes=tuple(plan.nodes),
        port=args.port,
        gpus=args.gpus,
        demo=services.demo,
        timeout_s=args.timeout,
        wait=not args.no_wait,
    )
    started = gang_up.up(request, services.state, lambda text: _say(args, text), where)
    return _gang_outcome(args, started, waited=not args.no_wait)


def _gang_outcome(args: argparse.Namespace, started: GangStarted, *, waited: bool) -> int:
    """Print where a gang started on other hosts ended up (its head's status, with
    `--json` as JSON, as `up` prints it); its exit status."""
    from console.core.via_host import ddconsole_command

    head = started.head
    if args.json:
        print_json(head)
    state = head.get("state")
    if state == "ready":
        _say(args, f"ready: {head.get('url')} (on {head.get('host')})")
    elif state in ("failed", "stopped"):
        _say(args, f"FAILED: {head.get('reason')}")
    elif waited:
        _say(
            args,
            f"not ready yet (state {state}); `{ddconsole_command()} down {head.get('id')}` "
            "stops it",
        )
    return started.code


def _up_node(args: argparse.Namespace) -> int:
    """Node `--node-rank` of gang `--gang-id`, started here for the console host."""
    from console.core.errors import UsageError
    from console.core.net import free_port
    from console.server.actions import launch_interpreter
    from console.server.gang import node_id
    from console.topology.nodes import node_plan

    if args.node_rank is None or not args.gang_nodes or not args.dist_init_addr:
        raise UsageError("--gang-id needs --node-rank, --gang-nodes and --dist-init-addr")
    services = _services(args)
    manager = services.manager()
    plan = make_plan_for(services, args)
    nodes = args.gang_nodes.split(",")
    if not 0 <= args.node_rank < len(nodes):
        raise UsageError(f"--node-rank {args.node_rank}: the gang has {len(nodes)} nodes")
    addr = args.dist_init_addr
    bind = plan.host if plan.host not in ("", "::") else "0.0.0.0"
    if args.node_rank == 0:
        if args.port is None:
            plan = _port_for_up(args, services, manager, plan)
        port = plan.port
        host, _, dist_port = addr.rpartition(":")
        if dist_port == "0":  # the rendezvous port, picked free on the head's host
            try:
                addr = f"{host}:{free_port(host.strip('[]'))}"
            except OSError:
                addr = f"{host}:{free_port('0.0.0.0')}"
    else:
        # A non-head node serves only SGLang's dummy health server: any free port does.
        port = args.port if args.port is not None else free_port(bind)
    ids = [node_id(args.gang_id, rank) for rank in range(len(nodes))]
    server_id = ids[args.node_rank]
    running = server_id in manager.records.ids() and not (
        manager.status(server_id, probe=False).state.terminal
    )
    if running:
        raise UsageError(f"{server_id} runs here already")
    node = node_plan(plan, args.node_rank, nodes, addr, port)
    record = manager.launch_node(
        node, server_id=server_id, gang=ids, interpreter=launch_interpreter(node)
    )
    return _outcome(args, manager.status(record.id, probe=False), waited=False)


def make_plan_for(services: Services, args: argparse.Namespace) -> Any:
    from console.cli.cmd_plan import make_plan

    return make_plan(services, args.profile, args.layout, args.variant, args.port, args.gpus)


def _port_for_up(
    args: argparse.Namespace, services: Services, manager: ServerManager, plan: Any
) -> Any:
    """The plan on the profile's port, or on the next free one when that is held (and
    saying so); a held port given with --port is an error naming the flag."""
    from console.cli.cmd_plan import make_plan
    from console.core.errors import UsageError
    from console.server import actions

    held = actions.port_held(manager, plan)
    if held is None:
        return plan
    if args.port is not None:
        raise UsageError(
            f"--port {args.port}: {held}",
            hint="choose another port, or leave out --port and `up` picks the next free one",
        )
    port = actions.free_port_for(manager, plan)
    if port is None:
        raise UsageError(f"{held}, and so are the next ports", hint="choose one with --port")
    _say(args, f"{held}; using port {port}")
    return make_plan(services, args.profile, args.layout, args.variant, port, args.gpus)


EXTERNAL_COLUMNS = [
    *("ID", "STATE", "PID", "ADDRESS", "MODEL", "LAYOUT", "SCHEDULERS", "GPUS"),
    *("NUMA", "UPTIME", "REASON"),
]


def _externals(services: Services, *, probe: bool = True) -> list[ExternalServer]:
    """SGLang servers on this host that ddconsole did not start (none in demo mode: the
    demo's host is simulated)."""
    if services.demo:
        return []
    from console.server.external import ExternalScanner

    gpus = [gpu.index for gpu in services.topology().gpus]
    scanner = ExternalScanner(services.manager().records, services.gpu_backend, gpus)
    try:
        # A one-shot command: the GPU backend is asked here, no executor to share.
        return scanner.scan(probe=probe, holders=scanner.gpu_holders() if probe else None)
    finally:
        scanner.close()


def _ps(args: argparse.Namespace) -> int:
    from console.server.gateway import degraded
    from console.server.tidy import split_folded

    services = _services(args)
    manager = services.manager()
    statuses, problems = manager.statuses()
    folded: list[ServerStatus] = []
    if not args.all:
        statuses, folded = split_folded(statuses, _fold_after_s())
    externals = _externals(services)
    # A gateway routing without some of its replicas says so.
    notes = {s.id: note for s in statuses if (note := degraded(manager, s)) is not None}
    if args.json:
        print_json(
            [
                {
                    **s.to_json(),
                    "external": False,
                    **({"degraded": notes[s.id]} if s.id in notes else {}),
                }
                for s in statuses
            ]
            + [e.to_json() for e in externals]
        )
        for problem in problems:
            print(f"ddconsole: warning: {problem}", file=sys.stderr)
        return 0
    from console.core.units import format_duration, format_index_set

    if not statuses and not problems and not folded:
        print("no managed servers" + (" (demo)" if services.demo else "") + _other_mode(services))
    rows = []
    for status in statuses:
        plan = status.record.plan
        rows.append(
            [
                status.id,
                plan.profile,
                # A multi-node server: one row per node, its rank beside the layout.
                f"{plan.layout} [{plan.node_rank}]" if status.record.gang else plan.layout,
                plan.variant,
                status.state.value,
                status.pid or "-",
                plan.port,
                ",".join(map(str, plan.gpus)),
                format_duration(status.uptime_s),
                notes.get(status.id)
                or status.reason
                or ("" if status.state.value == "ready" else status.phase_label or ""),
            ]
        )
    if rows:
        print(
            table(
                [
                    "ID",
                    "PROFILE",
                    "LAYOUT",
                    "VARIANT",
                    "STATE",
                    "PID",
                    "PORT",
                    "GPUS",
                    "UPTIME",
                    "REASON",
                ],
                rows,
            )
        )
    for problem in problems:
        print(f"! {problem}")
    if folded:
        demo = " --demo" if services.demo else ""
        print(
            f"{len(folded)} stopped server{'s' if len(folded) != 1 else ''} hidden; "
            f"`{_dd()} ps --all{demo}` shows them, `{_dd()} prune{demo}` removes them"
        )
    _print_gangs(services)
    if externals:
        print()
        print("external (SGLang servers ddconsole did not start; never stopped by `down --all`):")
        print(
            table(
                EXTERNAL_COLUMNS,
                [
                    [
                        e.id,
                        e.state,
                        e.pid,
                        e.address,
                        e.served_model_name or e.model or "-",
                        e.layout,
                        ",".join(map(str, e.scheduler_pids)) or "-",
                        format_index_set(list(e.gpus)) or "-",
                        format_index_set(list(e.numa_nodes)) or "-",
                        format_duration(e.uptime_s),
                        e.reason or "",
                    ]
                    for e in externals
                ],
            )
        )
    return 0


def _print_gangs(services: Services) -> None:
    """The multi-node servers this host started on other hosts (their nodes' records are
    on those hosts): one row each, from its file here."""
    from console.core.errors import StateError
    from console.core.via_host import ddconsole_command
    from console.fleet import gang_file

    rows = []
    for gang_id in gang_file.gang_ids(services.state):
        try:
            gang = gang_file.load(gang_file.gang_path(services.state, gang_id))
        except StateError as exc:
            print(f"! {exc.message}")
            continue
        if gang.ended_wall is not None:
            state, reason = ("failed", gang.failure) if gang.failure else ("stopped", "")
        elif gang_file.watcher_alive(
            gang.watcher_pid, gang_file.gang_path(services.state, gang_id)
        ):
            state, reason = "running", "supervised from this host"
        else:
            state, reason = "running", "NOT supervised: its supervisor ended"
        nodes = ", ".join(f"{n.rank}:{n.host}" for n in gang.nodes)
        rows.append([gang.id, gang.profile, gang.layout, nodes, state, reason or ""])
    if rows:
        print()
        dd = ddconsole_command()
        print(
            "multi-node servers on other hosts (`ddconsole --host HOST ps` shows each node; "
            f"`{dd} restart ID` and `{dd} down ID` act on every node):"
        )
        print(table(["ID", "PROFILE", "LAYOUT", "NODES", "STATE", "REASON"], rows))


def _fold_after_s() -> float:
    """The fold age from config.toml; a damaged file is a warning here (listing servers must
    not fail on it) and the default age is used."""
    from console.core.errors import UsageError
    from console.core.settings import DEFAULT_FOLD_STOPPED_AFTER_S, load_settings

    try:
        return load_settings().fold_stopped_after_s
    except UsageError as exc:
        print(f"ddconsole: warning: {exc.message}; folding after 1h", file=sys.stderr)
        return DEFAULT_FOLD_STOPPED_AFTER_S


def _other_mode(services: Services, verb: str = "ps") -> str:
    """A note naming the servers of the other mode's state dir (demo servers are apart), so
    `ps` without `--demo` does not look empty while demo servers run; "" when it has none."""
    from console.core.paths import StatePaths
    from console.server.records import Records

    other = not services.demo
    count = len(Records(StatePaths.for_mode(other)).ids())
    if not count:
        return ""
    flag = " --demo" if other else ""
    kind = "demo server" if other else "server outside demo mode"
    plural = "s" if count != 1 else ""
    return f"; {count} {kind}{plural}: `{_dd()} {verb}{flag}`"


def _targets(args: argparse.Namespace, manager: ServerManager) -> list[str]:
    from console.core.errors import UsageError

    if args.all:
        return list(manager.records.ids())
    if not args.ids:
        raise UsageError(f"name the servers to stop (see `{_dd()} ps`), or use --all")
    return [_resolve(args, manager, text) for text in args.ids]


def _resolve(args: argparse.Namespace, manager: ServerManager, text: str) -> str:
    """The server named `text`: with --exact only that very id, else an id or a unique
    prefix."""
    from console.core.errors import UsageError

    if getattr(args, "exact", False) and text not in manager.records.ids():
        raise UsageError(f"no server with the exact id {text!r} (--exact)")
    return manager.resolve_id(text)


def _external_named(services: Services, text: str) -> ExternalServer | None:
    """The external server with exactly this id (ext-PID), or None."""
    from console.server.external import ID_PREFIX

    if not text.startswith(ID_PREFIX):
        return None
    return next((e for e in _externals(services, probe=False) if e.id == text), None)


def _refuse_external(services: Services, args: argparse.Namespace) -> None:
    """`down` without --external never touches a server ddconsole did not start."""
    from console.core.errors import UsageError

    for text in args.ids:
        if text in services.manager().records.ids():
            continue
        found = _external_named(services, text)
        if found is not None:
            raise UsageError(
                f"{found.id} is external: an SGLang server ddconsole did not start (pid "
                f"{found.pid}, {found.address}); `down` leaves it alone. To stop it "
                f"anyway: `{_dd()} down {found.id} --external --yes`"
            )


def _down_external(args: argparse.Namespace, services: Services) -> int:
    """Stop external servers the user named one by one, after a confirmation."""
    from console.core.errors import UsageError
    from console.server.external import stop_external

    if args.all:
        raise UsageError(f"--external stops only servers named by id (see `{_dd()} ps`)")
    if not args.ids:
        raise UsageError(f"name the external servers to stop (ids from `{_dd()} ps`: ext-PID)")
    if services.demo:
        raise UsageError("--external: demo mode lists no external servers (drop --demo)")
    targets = []
    for text in args.ids:
        found = _external_named(services, text)
        if found is None:
            raise UsageError(
                f"no external server {text!r} (ids from `{_dd()} ps`: ext-PID); "
                "managed servers are stopped without --external"
            )
        targets.append(found)
    names = ", ".join(f"{e.id} (pid {e.pid}, {e.address})" for e in targets)
    if not args.yes:
        if not sys.stdin.isatty():
            raise UsageError(f"stopping {names}, not started by ddconsole: confirm with --yes")
        answer = input(f"stop {names}, not started by ddconsole? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            _say(args, "nothing changed")
            return 1
    results = []
    code = 0
    for found in targets:
        _say(args, f"  {found.id}: SIGTERM to pid {found.pid}")
        report = stop_external(found, grace=args.grace)
        _say(args, report.summary())
        code = code or (1 if report.remaining else 0)
        results.append(report.to_json())
    if args.json:
        print_json(results)
    return code


def _down(args: argparse.Namespace) -> int:
    from console.core.errors import StateError
    from console.server.gateway import group_of, retire_group

    services = _services(args)
    if args.gang_failure is not None:
        return _down_for_gang(args, services)
    if args.external:
        return _down_external(args, services)
    gangs_done, gangs_code = _down_gangs(args, services)
    if gangs_done:
        return gangs_code
    if not args.all:
        _refuse_external(services, args)
    manager = services.manager()
    results: list[dict[str, object]] = []  # `down --json`: one object per server
    code = gangs_code
    targets = _targets(args, manager)
    if not targets:
        _say(args, "no managed servers to stop" + _other_mode(services, "down --all"))
    for server_id in targets:
        if args.all and server_id not in manager.records.ids():
            continue  # a replica forgotten with its ended gateway above

        def progress(elapsed: float, text: str, sid: str = server_id) -> None:
            _say(args, f"  {sid} {elapsed:5.1f}s {text}")

        try:
            status = manager.status(server_id, probe=False)
        except StateError as exc:
            # An unreadable record: stop whatever still carries its marker, then drop it.
            removed = manager.stop_unreadable(server_id, grace=args.grace, on_event=progress)
            _say(args, f"{server_id}: {exc.message}; {removed}")
            results.append({"id": server_id, "result": "removed unreadable state file"})
            continue
        if status.state.terminal:
            group = group_of(manager.paths, server_id)
            if group is not None and group.id == server_id:
                # An ended gateway: its replicas still running stop too, then all is forgotten.
                reason = f"the gateway {server_id} ended; taken down with it"
                for line in retire_group(manager, group, reason=reason, grace=args.grace):
                    _say(args, line)
            if status.orphans:
                # Processes of a dead (or unknown) leader: stop them before forgetting it.
                _say(args, manager.stop(server_id, grace=args.grace, on_event=progress).summary())
            try:
                manager.forget(server_id)
            except StateError as exc:
                _say(args, f"{server_id}: {exc}")
                results.append({"id": server_id, "result": "not forgotten", "error": exc.message})
                code = 1
                continue
            _say(
                args,
                f"forgot {server_id} ({status.state.value}"
                f"{': ' + status.reason if status.reason else ''})",
            )
            results.append({"id": server_id, "result": "forgotten", "state": status.state.value})
            continue
        reason = (args.gang_node and args.stop_reason) or "stopped by the user"
        report = manager.stop(server_id, grace=args.grace, reason=reason, on_event=progress)
        _say(args, report.summary())
        if report.port_free is False or report.notes:
            code = 1
        results.append(
            {
                "id": server_id,
                "result": "stopped",
                "sigterm": report.sent_sigterm,
                "sigkill": report.escalated,
                "seconds": report.seconds,
                "port_free": report.port_free,
                "gpus_released": report.gpus_released,
                "notes": report.notes,
                "warnings": report.warnings,
            }
        )
    if args.json:
        print_json(results)
    return code


def _down_for_gang(args: argparse.Namespace, services: Services) -> int:
    """This host's nodes of a gang stopped with the reason a node elsewhere ended."""
    from console.server.gang import stop_for_gang

    manager = services.manager()
    results = []
    for server_id in [manager.resolve_id(text) for text in args.ids]:
        done = stop_for_gang(manager, server_id, args.gang_failure, args.grace)
        _say(args, f"{server_id}: {done} ({args.gang_failure})")
        results.append({"id": server_id, "result": done})
    if args.json:
        print_json(results)
    return 0


def _down_gangs(args: argparse.Namespace, services: Services) -> tuple[bool, int]:
    """`down ID` of a gang whose nodes run on other hosts (its file is here): every node is
    stopped on its host. (every id named was such a gang, so nothing else is to do; the exit
    status so far)."""
    from console.core.errors import ConsoleError
    from console.fleet import gang_file

    if args.gang_node:
        return False, 0
    if args.all:
        paths = [gang_file.gang_path(services.state, i) for i in gang_file.gang_ids(services.state)]
        rest = True
    else:
        found = [(text, _gang_named(args, services, text)) for text in args.ids]
        paths = [path for _, path in found if path is not None]
        args.ids = [text for text, path in found if path is None]
        rest = bool(args.ids)
    results: list[dict[str, Any]] = []
    code = 0
    if paths:
        # Only now: SSH (asyncssh) costs a plain `down` nothing when no gang spans hosts.
        from console.fleet import gang_up
    for path in paths:
        try:
            results.append(
                gang_up.down(
                    path,
                    grace=args.grace,
                    reason="stopped by the user",
                    say=lambda t: _say(args, t),
                )
            )
        except ConsoleError as exc:
            # One gang whose host does not answer keeps no other server from stopping.
            _say(args, f"ddconsole: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
            results.append({"id": path.stem, "result": "not stopped", "error": exc.message})
            code = 1
    if paths and not rest and args.json:
        print_json(results)
    return bool(paths) and not rest, code


def _gang_named(args: argparse.Namespace, services: Services, text: str) -> Path | None:
    """The file of the gang named `text` (with --exact, by its very id only); None if none.
    A prefix that also starts a server of this host is refused as ambiguous: stopping every
    node of a gang is never a guess."""
    from console.core.errors import UsageError
    from console.fleet import gang_file

    if args.exact:
        ids = gang_file.gang_ids(services.state)
        return gang_file.gang_path(services.state, text) if text in ids else None
    path = gang_file.find(services.state, text)
    if path is None or path.stem == text:
        return path
    gang = path.stem
    servers = [
        i
        for i in services.manager().records.ids()
        # The gang's own nodes on this host (its head's id is the gang's) are no other.
        if i.startswith(text) and i != gang and not i.startswith(f"{gang}.node")
    ]
    if servers:
        raise UsageError(
            f"ambiguous id {text!r}: the multi-node server {gang} and the server"
            f"{'s' if len(servers) > 1 else ''} {', '.join(servers)} here",
            hint="name it in full",
        )
    return path


def _restart(args: argparse.Namespace) -> int:
    from console.server import actions

    services = _services(args)
    gang = _gang_named(args, services, args.id)
    if gang is not None:
        return _restart_gang(args, gang)
    manager = services.manager()
    server_id = _resolve(args, manager, args.id)
    try:
        status = actions.restart(
            manager,
            server_id,
            grace=args.grace,
            timeout=args.timeout,
            on_event=lambda text: _say(args, text),
        )
    except actions.StillHeld as exc:
        _say(args, exc.message)
        return 1
    return _outcome(args, status)


def _restart_gang(args: argparse.Namespace, path: Path) -> int:
    """`restart ID` of a gang whose nodes run on other hosts (its file is here): every node
    stopped, then started again under the same ids; the head's readiness as `up` waits."""
    # Only now: SSH (asyncssh) costs a plain `restart` nothing.
    from console.fleet import gang_up

    started = gang_up.restart(
        path, grace=args.grace, timeout_s=args.timeout, say=lambda text: _say(args, text)
    )
    return _gang_outcome(args, started, waited=True)


def _switch(args: argparse.Namespace) -> int:
    from console.cli.cmd_plan import make_plan
    from console.core.errors import UsageError
    from console.server import actions

    services = _services(args)
    manager = services.manager()
    plan = make_plan(services, args.profile, args.layout, args.variant, args.port, args.gpus)
    victims = actions.in_the_way(manager, plan)
    _say(
        args,
        f"switch to {plan.profile} / {plan.layout} / {plan.variant} (GPUs "
        f"{','.join(map(str, plan.gpus))}, port {plan.port})",
    )
    if victims and not args.yes:
        names = ", ".join(
            f"{s.id} ({s.state.value}, GPUs {','.join(map(str, s.record.plan.gpus))})"
            for s in victims
        )
        if not sys.stdin.isatty():
            raise UsageError(f"switching stops {names}; confirm with --yes")
        answer = input(f"stop {names}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            _say(args, "nothing changed")
            return 1
    try:
        status = actions.switch(
            manager,
            plan,
            victims=victims,
            grace=args.grace,
            timeout=args.timeout,
            on_event=lambda text: _say(args, text),
        )
    except actions.StillHeld as exc:
        _say(args, exc.message)
        return 1
    return _outcome(args, status)


def _logs(args: argparse.Namespace) -> int:
    import os

    from console.core.redact import redact_text, secret_values
    from console.server.milestones import LogFollower, tail_and_end, tail_lines

    services = _services(args)
    manager = services.manager()
    server_id = _resolve(args, manager, args.id)
    status = manager.status(server_id, probe=False)
    key_env = status.record.plan.api_key_env
    secrets = secret_values(os.environ, [key_env] if key_env else [])

    def show(line: str) -> None:
        """Every log line the console prints has its secrets masked."""
        print(redact_text(line, secrets), flush=True)

    if args.json:
        return _logs_json(args, manager, status, secrets)
    if status.state.value == "failed":
        show(f"== {server_id} failed: {status.reason}")
        for line in status.failure.excerpt if status.failure else ():
            show(f"== | {line}")
        print("==")
    if not args.follow:
        for line in tail_lines(status.record.log_path, args.lines):
            show(line)
        return 0
    # Following: the tail's whole lines, then every line from where they end.
    tail, end = tail_and_end(status.record.log_path, args.lines)
    for line in tail:
        show(line)
    follower = LogFollower(status.record.log_path, offset=end)
    try:
        while True:
            for line in follower.read_new_lines():
                show(line)
            current = manager.status(server_id, probe=False)
            if current.state.terminal:
                for line in follower.read_new_lines():
                    show(line)
                print(
                    f"== {server_id} {current.state.value}"
                    f"{': ' + current.reason if current.reason else ''}"
                )
                return 0
            time.sleep(0.25)
    except KeyboardInterrupt:
        return 0


def _logs_json(
    args: argparse.Namespace, manager: ServerManager, status: ServerStatus, secrets: Any
) -> int:
    """`logs --json`: the status and the masked lines, as one object or, following, as JSON
    lines (a consumer reads each as it comes)."""
    import json

    from console.core.redact import redact_text
    from console.server.milestones import LogFollower, tail_and_end, tail_lines

    if not args.follow:
        tail = tail_lines(status.record.log_path, args.lines)
        lines = [redact_text(line, secrets) for line in tail]
        print_json({"server": status.to_json(), "lines": lines})
        return 0
    # Following: the tail's whole lines, then every line from where they end.
    tail, end = tail_and_end(status.record.log_path, args.lines)
    lines = [redact_text(line, secrets) for line in tail]

    def emit(data: dict[str, Any]) -> None:
        print(json.dumps(data), flush=True)

    emit({"server": status.to_json()})
    for line in lines:
        emit({"line": line})
    follower = LogFollower(status.record.log_path, offset=end)
    try:
        while True:
            for line in follower.read_new_lines():
                emit({"line": redact_text(line, secrets)})
            current = manager.status(status.id, probe=False)
            if current.state.terminal:
                for line in follower.read_new_lines():
                    emit({"line": redact_text(line, secrets)})
                emit({"end": current.state.value, "reason": current.reason})
                return 0
            time.sleep(0.25)
    except KeyboardInterrupt:
        return 0
