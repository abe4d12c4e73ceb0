"""Launch, switch and restart as both front ends run them, and a plan's API-key header.

`ddconsole up|switch|restart` and the TUI's live backend call these same functions, so the
steps (stop what is in the way, refuse while its port or GPUs are still held, launch, wait)
and the progress lines are one implementation. Progress goes to `on_event` as text; each
front end renders it (the CLI prints it, the TUI shows it in the activity pane). Questions
to the user (confirming a switch) stay in the front ends: they happen before these run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from console.core.auth import bearer_from_env
from console.core.errors import ConsoleError, UsageError
from console.core.net import port_is_free
from console.core.units import format_index_set
from console.hw.procs import port_owner
from console.server.gateway import group_of, relaunch_group, stop_replicas
from console.server.manager import DEFAULT_GRACE_S, MARKER_ENV, ServerManager
from console.server.records import ServerRecord
from console.server.status import ServerState, ServerStatus
from console.topology.placement import Plan, next_free_port

Say = Callable[[str], None]


def _quiet(text: str) -> None:
    """The default `on_event`: nothing to show."""


class StillHeld(ConsoleError):
    """A stopped server's port or GPUs are still held, so the next launch would fail."""


def auth_headers(plan: Plan, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Authorization header for a managed server's `--api-key` (empty without one)."""
    return bearer_from_env(plan.api_key_env, environ)


def launch_interpreter(plan: Plan) -> str | None:
    """The program preflight checks before a launch: the plan's argv[0] (the SGLang
    interpreter, or the `sglang` script of `sglang serve`); none in demo mode, where the
    console's own interpreter runs the simulator."""
    return None if plan.demo or not plan.argv else plan.argv[0]


def ready_server(manager: ServerManager, server: str) -> ServerStatus:
    """The managed server named `server` (an id or its unique prefix), when it is ready to
    be benchmarked; UsageError otherwise."""
    server_id = manager.resolve_id(server)
    status = manager.status(server_id)
    if status.state is not ServerState.READY:
        raise UsageError(f"server {server_id} is {status.state.value}, not ready")
    return status


def in_the_way(
    manager: ServerManager, plan: Plan, *, replacing: str | None = None
) -> list[ServerStatus]:
    """Active managed servers a switch to `plan` stops: `replacing` first (the server the
    user switches away from), then every other one holding the plan's GPUs or port."""
    found = [s for s in manager.conflicts(plan) if s.id != replacing]
    if replacing is not None:
        status = manager.status(replacing, probe=False)
        if not status.state.terminal:
            found.insert(0, status)
    return found


def port_held(manager: ServerManager, plan: Plan) -> str | None:
    """Why the plan's port cannot be used now (promised to an active managed server, or
    bound by anything on this host); None when it is free."""
    statuses, _ = manager.statuses(probe=False, orphan_scan=False)
    for status in statuses:
        if not status.state.terminal and status.record.plan.port == plan.port:
            return (
                f"port {plan.port} is promised to managed server {status.id} ({status.state.value})"
            )
    if not port_is_free(plan.port, plan.host):
        owner = port_owner(plan.port)
        who = f" by pid {owner[0]} ({owner[1][:80]})" if owner else ""
        return f"port {plan.port} on {plan.host} is in use{who}"
    return None


def free_port_for(manager: ServerManager, plan: Plan) -> int | None:
    """The first port after the plan's own that no active managed server is promised and
    nothing on this host holds; None when the next PORT_TRIES are all taken."""
    statuses, _ = manager.statuses(probe=False, orphan_scan=False)
    promised = {s.record.plan.port for s in statuses if not s.state.terminal}
    return next_free_port(plan.port + 1, plan.host, taken=promised)


def launch(
    manager: ServerManager, plan: Plan, *, server_id: str | None = None, on_event: Say = _quiet
) -> ServerRecord:
    """Preflight and start `plan` detached (under `server_id` to reuse a name); returns once
    its process exists. The plan's warnings and the preflight's notes go to `on_event`."""
    for warning in plan.warnings:
        on_event(f"  ! {warning.message}")
    record = manager.launch(plan, interpreter=launch_interpreter(plan), server_id=server_id)
    for note in record.notes:
        on_event(f"  ! {note}")
    spawn = manager.records.spawn(record.id)
    pid = spawn.pid if spawn else "?"
    demo = "  [demo]" if plan.demo else ""
    on_event(
        f"{record.id}: pid {pid}, port {plan.port}, GPUs "
        f"{','.join(map(str, record.plan.gpus)) or 'none'}, log {record.log_path}{demo}"
    )
    for rank, node_id in enumerate(record.gang[1:], 1):
        # The other nodes of a multi-node server: each its own process, port and log.
        node = manager.records.load(node_id)
        node_spawn = manager.records.spawn(node_id)
        on_event(
            f"{node_id}: node {rank} ({plan.nodes[rank]}), pid "
            f"{node_spawn.pid if node_spawn else '?'}, port {node.plan.port}, "
            f"log {node.log_path}"
        )
    if record.gang:
        addr = record.plan.dist_init_addr
        on_event(f"  rendezvous at {addr}; the head's readiness is the server's")
    group = group_of(manager.paths, record.id)
    for replica_id in group.replicas if group is not None else ():
        # Replicas behind a gateway: each its own server, registered with it once ready.
        replica = manager.records.load(replica_id)
        replica_spawn = manager.records.spawn(replica_id)
        on_event(
            f"{replica_id}: pid {replica_spawn.pid if replica_spawn else '?'}, port "
            f"{replica.plan.port}, GPUs {','.join(map(str, replica.plan.gpus))}, "
            f"log {replica.log_path}"
        )
    if group is not None:
        on_event("  the gateway's readiness (a registered, healthy replica) is the whole's")
    return record


def wait_ready(
    manager: ServerManager, server_id: str, *, timeout: float | None = None, on_event: Say = _quiet
) -> ServerStatus:
    """Follow a starting server to ready, failed, or `timeout`; milestones go to `on_event`."""
    return manager.wait(
        server_id,
        timeout=timeout,
        on_event=lambda elapsed, label: on_event(f"  {elapsed:6.1f}s  {label}"),
    )


def stop_for_launch(
    manager: ServerManager,
    status: ServerStatus,
    *,
    reason: str,
    grace: float = DEFAULT_GRACE_S,
    on_event: Say = _quiet,
) -> str:
    """Stop a server whose port or GPUs a launch needs; StillHeld when they stay taken.
    Returns the stop's one-line summary."""
    started = time.monotonic()
    report = manager.stop(status.id, grace=grace, reason=reason)
    on_event(f"  {report.summary()} [{time.monotonic() - started:.1f}s]")
    held = []
    if report.port_free is False:
        held.append(f"port {status.record.plan.port}")
    if report.gpus_released is False:
        held.append(f"GPUs {format_index_set(list(status.record.plan.gpus))}")
    if held:
        raise StillHeld(
            f"{status.id} still holds {' and '.join(held)} after stopping; not launching"
        )
    return report.summary()


def switch(
    manager: ServerManager,
    plan: Plan,
    *,
    victims: Sequence[ServerStatus],
    grace: float = DEFAULT_GRACE_S,
    timeout: float | None = None,
    on_event: Say = _quiet,
) -> ServerStatus:
    """Stop `victims` (from `in_the_way`, as the user confirmed them), refuse with StillHeld
    if any still holds its port or GPUs, then launch `plan` and wait for it."""
    if not victims:
        on_event("no managed server holds those GPUs")
    for status in victims:
        on_event(f"stopping {status.id}")
        stop_for_launch(
            manager, status, reason=f"switched to {plan.profile}", grace=grace, on_event=on_event
        )
    record = launch(manager, plan, on_event=on_event)
    return wait_ready(manager, record.id, timeout=timeout, on_event=on_event)


def restart(
    manager: ServerManager,
    server_id: str,
    *,
    grace: float = DEFAULT_GRACE_S,
    timeout: float | None = None,
    on_event: Say = _quiet,
) -> ServerStatus:
    """Stop the server if it runs (StillHeld if its port or GPUs stay taken), relaunch its
    plan under the same id, and wait for it."""
    record = manager.records.load(server_id)
    group = group_of(manager.paths, server_id)
    if group is not None and group.id == server_id:
        # A gateway: the whole restarts (its replicas, then it), under the same ids.
        status = manager.status(server_id, probe=False)
        if not status.state.terminal:
            stop_for_launch(manager, status, reason="restart", grace=grace, on_event=on_event)
        for report in stop_replicas(manager, group, reason="restart", grace=grace):
            # An ended gateway's replicas may still run: stopped before they relaunch.
            on_event(f"  {report.summary()}")
        relaunch_group(manager, group, launch_interpreter, MARKER_ENV)
        on_event(f"{server_id}: relaunched with {len(group.replicas)} replicas")
        return wait_ready(manager, server_id, timeout=timeout, on_event=on_event)
    if record.gang and record.gang[0] != server_id:
        # A node of a multi-node server: the gang restarts, under its head's id.
        server_id = record.gang[0]
        record = manager.records.load(server_id)
    status = manager.status(server_id, probe=False)
    if not status.state.terminal:
        stop_for_launch(manager, status, reason="restart", grace=grace, on_event=on_event)
    launch(manager, record.plan, server_id=server_id, on_event=on_event)
    return wait_ready(manager, server_id, timeout=timeout, on_event=on_event)
