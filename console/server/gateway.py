"""DP replicas behind SGLang's model gateway, launched and stopped as one.

Every replica is a managed server of its own (record, waiter, log), and so is the gateway
(`smg launch`); the gateway's id names the whole and the replicas are `ID.replica0`,
`ID.replica1`, ... A group file (`gateways/ID.json` in the state dir) ties them together.
A detached watcher (console.server.gateway_watch) registers each replica with the gateway
once it is ready and removes one whose process is gone, within a fraction of a second; the
gateway's own health check would keep such a worker listed for minutes. The gateway's
readiness (`/readiness`: at least one healthy worker) is the whole's.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.core.errors import ConsoleError, StateError, UsageError
from console.core.net import free_port
from console.core.paths import StatePaths
from console.profiles.models import Layout
from console.server.gateway_api import GatewayClient, GatewayError
from console.server.gateway_plan import gateway_plan, replica_plans, smg_executable
from console.server.records import ServerRecord
from console.topology.placement import Plan, next_free_port

if TYPE_CHECKING:
    from console.server.manager import ServerManager, StopReport
    from console.server.status import ServerStatus

WATCH_MODULE = "console.server.gateway_watch"
GROUPS_DIR = "gateways"


def replica_id(gateway_id: str, index: int) -> str:
    return f"{gateway_id}.replica{index}"


@dataclass(frozen=True)
class GatewayGroup:
    """A gateway's server id and its replicas' ids, in order."""

    id: str
    replicas: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"gateway": self.id, "replicas": list(self.replicas)}

    @classmethod
    def from_json(cls, data: Any) -> GatewayGroup:
        if not isinstance(data, dict) or not isinstance(data.get("gateway"), str):
            raise ValueError("not a gateway group")
        replicas = data.get("replicas")
        if not isinstance(replicas, list) or not all(isinstance(r, str) for r in replicas):
            raise ValueError("replicas is not a list of ids")
        return cls(data["gateway"], tuple(replicas))


def group_path(paths: StatePaths, gateway_id: str) -> Path:
    return paths.root / GROUPS_DIR / f"{gateway_id}.json"


def load_group(paths: StatePaths, gateway_id: str) -> GatewayGroup | None:
    try:
        return GatewayGroup.from_json(json.loads(group_path(paths, gateway_id).read_text()))
    except (OSError, ValueError):
        return None


def save_group(paths: StatePaths, group: GatewayGroup) -> None:
    """Written whole (temp file, rename), so a reader never sees half of it."""
    folder = paths.root / GROUPS_DIR
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".group-")
    with os.fdopen(fd, "w") as handle:
        json.dump(group.to_json(), handle)
    os.replace(temp, group_path(paths, group.id))


def remove_group(paths: StatePaths, gateway_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        group_path(paths, gateway_id).unlink()


def group_of(paths: StatePaths, server_id: str) -> GatewayGroup | None:
    """The group `server_id` is the gateway or a replica of, if any."""
    own = load_group(paths, server_id)
    if own is not None:
        return own
    head, dot, _ = server_id.rpartition(".replica")
    if not dot:
        return None
    group = load_group(paths, head)
    return group if group is not None and server_id in group.replicas else None


def _log(record: ServerRecord, text: str) -> None:
    """A ddconsole line in a server's log (the waiter copies the process's output there)."""
    with contextlib.suppress(OSError), open(record.log_path, "ab") as log:
        log.write(f"ddconsole: {text}\n".encode())


def watch_log_path(gateway_log: str | Path) -> Path:
    """The watcher's stderr, next to the gateway's log: `ID.log` -> `ID.watch.log`."""
    log = Path(gateway_log)
    return log.with_name(f"{log.stem}.watch.log")


def start_watch(
    paths: StatePaths, gateway_id: str, marker_env: str, gateway_log: str | Path
) -> None:
    """The detached watcher of a gateway's replicas; it carries no server marker, so it is no
    member of any server, and it ends when the gateway ends."""
    env = {k: v for k, v in os.environ.items() if k != marker_env}
    with open(watch_log_path(gateway_log), "ab") as errors:
        subprocess.Popen(
            [sys.executable, "-m", WATCH_MODULE, str(paths.root), gateway_id],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            start_new_session=True,
            close_fds=True,
        )


Launch = Callable[[Plan, str | None, str], ServerRecord]
"""Start one plan as a managed server: (plan, interpreter to preflight, server id)."""


def launch_group(
    manager: ServerManager,
    plan: Plan,
    layout: Layout,
    *,
    gateway_id: str,
    interpreter: str | None,
    launch_one: Launch,
    marker_env: str,
) -> ServerRecord:
    """Start every replica, then the gateway on the plan's port, then the watcher that
    registers the replicas once ready; returns the gateway's record. Anything that cannot
    start stops what was started."""
    spec = layout.gateway
    if spec is None:
        raise UsageError(f"layout {plan.layout!r} has no gateway")
    if plan.api_key_env or plan.admin_api_key_env:
        raise UsageError(
            f"layout {plan.layout!r}: replicas behind a gateway run without an API key here "
            "(the gateway would need it for every worker)",
            hint="unset server.api_key_env for this profile, or use a layout without a gateway",
        )
    smg = smg_executable(spec.smg)
    if not Path(smg).is_file():
        raise UsageError(
            f"layout {plan.layout!r}: the gateway's executable {spec.smg!r} is not installed",
            hint="`pip install smg`, or set gateway.smg in the layout to its path",
        )
    statuses, _ = manager.statuses(probe=False)
    taken = {s.record.plan.port for s in statuses if not s.state.terminal} | {plan.port}
    host = plan.host if plan.host not in ("0.0.0.0", "::") else "127.0.0.1"
    ports: list[int] = []
    for index in range(layout.replicas):
        port = next_free_port(plan.port + 1 + index, host, taken={*taken, *ports})
        if port is None:
            raise UsageError(f"no free port after {plan.port} for replica {index}")
        ports.append(port)
    ids = [replica_id(gateway_id, i) for i in range(layout.replicas)]
    paths = manager.paths
    paths.ensure()
    save_group(paths, GatewayGroup(gateway_id, tuple(ids)))
    started: list[ServerRecord] = []
    try:
        for replica_plan, rid in zip(replica_plans(plan, layout, ports), ids, strict=True):
            started.append(launch_one(replica_plan, interpreter, rid))
        front = gateway_plan(plan, layout, free_port(host))
        gateway = launch_one(front, None if plan.demo else smg, gateway_id)
        started.append(gateway)
    except BaseException as exc:
        reason = f"{len(started)} of the gateway's servers started ({exc}); the rest were stopped"
        for record in started:
            with contextlib.suppress(ConsoleError):
                manager.stop(record.id, reason=reason, group=False)
        remove_group(paths, gateway_id)
        raise
    for record in started[:-1]:
        _log(gateway, f"replica {record.id} at {record.url} is registered once ready")
    start_watch(paths, gateway_id, marker_env, gateway.log_path)
    return gateway


def relaunch_group(
    manager: ServerManager,
    group: GatewayGroup,
    interpreter: Callable[[Plan], str | None],
    marker_env: str,
) -> ServerRecord:
    """Start a stopped group again from its records, under the same ids: each replica, the
    gateway, and the watcher that registers the replicas once ready. Anything that cannot
    start stops what was started, and the error names the server refused."""
    started: list[str] = []
    try:
        for rid in (*group.replicas, group.id):
            plan = manager.records.load(rid).plan
            try:
                record = manager.launch(plan, interpreter=interpreter(plan), server_id=rid)
            except ConsoleError as exc:
                exc.message = f"{rid}: {exc.message}"
                raise
            started.append(rid)
    except BaseException as exc:
        reason = f"{len(started)} of the gateway's servers relaunched ({exc}); the rest stopped"
        for rid in started:
            with contextlib.suppress(ConsoleError):
                manager.stop(rid, reason=reason, group=False)
        raise
    start_watch(manager.paths, group.id, marker_env, record.log_path)
    return record


def live_replicas(manager: ServerManager, group: GatewayGroup) -> list[str]:
    """The group's replicas that have a record and are not stopped or failed."""
    ids = set(manager.records.ids())
    return [
        rid
        for rid in group.replicas
        if rid in ids and not manager.status(rid, probe=False).state.terminal
    ]


def stop_replicas(
    manager: ServerManager, group: GatewayGroup, *, reason: str, grace: float
) -> list[StopReport]:
    """Stop the replicas still running (the gateway itself is left as it is)."""
    return [
        manager.stop(rid, reason=reason, grace=grace, group=False)
        for rid in live_replicas(manager, group)
    ]


def retire_group(
    manager: ServerManager, group: GatewayGroup, *, reason: str, grace: float
) -> list[str]:
    """An ended gateway's `down`: its replicas still running are stopped, every replica's
    files are dropped and the group file removed; one line per replica for the user."""
    lines = [
        report.summary() for report in stop_replicas(manager, group, reason=reason, grace=grace)
    ]
    ids = set(manager.records.ids())
    for rid in group.replicas:
        if rid in ids:
            manager.forget(rid)
            lines.append(f"forgot {rid}")
    remove_group(manager.paths, group.id)
    return lines


def replica_failures(manager: ServerManager, group: GatewayGroup) -> dict[str, str]:
    """Each replica that has ended (stopped or failed) -> why."""
    failed: dict[str, str] = {}
    ids = set(manager.records.ids())
    for rid in group.replicas:
        if rid not in ids:
            failed[rid] = "its state file is gone"
            continue
        with contextlib.suppress(StateError):
            status = manager.status(rid, probe=False)
            if status.state.terminal:
                failed[rid] = status.reason or status.state.value
    return failed


def replica_urls(manager: ServerManager, group: GatewayGroup) -> dict[str, str]:
    """Each replica's id -> its URL (those whose record can be read)."""
    urls = {}
    for rid in group.replicas:
        with contextlib.suppress(StateError):
            urls[rid] = manager.records.load(rid).url
    return urls


def deregister(manager: ServerManager, group: GatewayGroup, replica_ids: list[str]) -> list[str]:
    """Take replicas out of the gateway before they stop (a gateway that is down already
    routes nowhere); one note per replica that could not be taken out."""
    notes: list[str] = []
    try:
        gateway = manager.records.load(group.id)
    except StateError:
        return notes
    client = GatewayClient(gateway.url)
    urls = replica_urls(manager, group)
    for rid in replica_ids:
        if rid not in urls:
            continue
        try:
            client.remove(urls[rid])
        except GatewayError as exc:
            if manager.status(group.id, probe=False).state.terminal:
                break
            notes.append(f"{rid} not taken out of the gateway first: {exc}")
    return notes


def stop_group(
    manager: ServerManager,
    group: GatewayGroup,
    server_id: str,
    stop_one: Callable[[str], StopReport],
) -> StopReport:
    """Stopping the gateway stops the whole: every replica is taken out of it, stopped
    (requests in flight finish in its grace period), then the gateway. Stopping one replica
    takes it out of the gateway first; the others keep serving."""
    if server_id != group.id:
        notes = deregister(manager, group, [server_id])
        report = stop_one(server_id)
        report.notes += notes
        return report
    live = [
        rid
        for rid in group.replicas
        if rid in manager.records.ids() and not manager.status(rid, probe=False).state.terminal
    ]
    notes = deregister(manager, group, live)
    replica_reports = [stop_one(rid) for rid in live]
    report = stop_one(group.id)
    for other in replica_reports:
        report.nodes.append(other.summary())
        report.notes += other.notes
        report.killed_pids += other.killed_pids
        report.escalated = report.escalated or other.escalated
        if other.port_free is False:
            report.port_free = False
        if other.gpus_released is False:
            report.gpus_released = False
    report.notes += notes
    return report


END_GRACE_S = 5.0
"""Grace for the replicas of a gateway whose start failed: they have served nothing yet."""


def settle_start(
    manager: ServerManager,
    status: ServerStatus,
    elapsed: float,
    on_event: Callable[[float, str], None],
) -> ServerStatus | None:
    """A starting gateway's end, when its start has failed: the gateway ended (its live
    replicas are stopped with its reason), or every replica ended (the gateway is stopped
    with theirs). None while the start goes on."""
    group = load_group(manager.paths, status.id)
    if group is None:
        return None
    if status.state.terminal:
        reason = f"the gateway {status.id} ended ({status.reason or status.state.value})"
        for report in stop_replicas(manager, group, reason=reason, grace=END_GRACE_S):
            on_event(elapsed, f"stopped {report.id}: {reason}")
        return status
    failed = replica_failures(manager, group)
    if not group.replicas or len(failed) < len(group.replicas):
        return None
    reason = "every replica ended: " + "; ".join(f"{rid}: {why}" for rid, why in failed.items())
    manager.stop(status.id, reason=reason, grace=END_GRACE_S)
    return manager.status(status.id, probe=False)


def report_failed_replicas(
    manager: ServerManager, gateway_id: str, elapsed: float, on_event: Callable[[float, str], None]
) -> None:
    """A ready gateway may route to fewer replicas than it has: one line per replica that
    ended, with why."""
    group = load_group(manager.paths, gateway_id)
    if group is None:
        return
    for rid, why in replica_failures(manager, group).items():
        on_event(elapsed, f"! replica {rid} ended, the gateway routes without it: {why}")


def gateway_workers(manager: ServerManager, live: set[str]) -> dict[str, dict[str, str]]:
    """Each live gateway among `live` ids -> its replicas' URL -> replica id: the replicas a
    monitor reads through the gateway's /engine_metrics instead of one by one."""
    found: dict[str, dict[str, str]] = {}
    for server_id in live:
        group = load_group(manager.paths, server_id)
        if group is not None:
            found[server_id] = {url: rid for rid, url in replica_urls(manager, group).items()}
    return found


def degraded(manager: ServerManager, status: ServerStatus) -> str | None:
    """For a running gateway some of whose replicas ended: which, for `ps`; else None."""
    group = load_group(manager.paths, status.id)
    if group is None or status.state.terminal:
        return None
    ended = replica_failures(manager, group)
    if not ended:
        return None
    return f"degraded: {len(ended)} of {len(group.replicas)} replicas ended ({', '.join(ended)})"
