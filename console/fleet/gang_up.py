"""`up` and `down` of a multi-node layout whose nodes run on hosts of hosts.toml.

Each node is started by its own host's ddconsole over that host's link (a hidden form of
`up`: `--gang-id ID --node-rank I --gang-nodes H0,H1 --dist-init-addr ADDR`), so it is a
detached managed server ON ITS HOST with its record, waiter and log there. The head goes
first and picks its rendezvous port on its own host; the others join it there. All start or
none stays: a node that cannot start stops those already started. Then a supervisor on this
host (console.fleet.gang_watch) stops the gang with the reason when any node ends on its own.

`restart ID` stops every node as `down` does, waits until all ended, and starts the gang
again from the request its file keeps, under the same gang and node ids.

The head's address is the one its host is reached at over SSH (the peer address of its
link, hosts.toml's target resolved); for a head on this host, the address this host has on
its link to another node's host.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from console.core.errors import ConsoleError, StateError, UsageError
from console.core.paths import StatePaths
from console.core.via_host import ddconsole_command
from console.fleet.gang_file import (
    WATCH_MODULE,
    GangFile,
    GangNode,
    end_watcher,
    gang_ids,
    gang_path,
    load,
    save,
    watcher_alive,
)
from console.fleet.hosts import LOCAL, Host, find_host, load_hosts
from console.fleet.link import HostLink, LinkDown, RemoteResult
from console.server.gang import node_id

NODE_START_TIMEOUT_S = 120.0
PS_TIMEOUT_S = 60.0
READY_POLL_S = 1.0
STOP_GRACE_S = 5.0
"""A non-head node only logs SIGTERM; its head's stop ends it (console.server.gang)."""
ENDED_TIMEOUT_S = 30.0
"""How long `restart` waits, beyond the grace, for every stopped node to read as ended."""
WATCHER_END_S = 10.0
"""How long `restart` waits for the old supervisor to end (SIGKILL after half of it)."""
TERMINAL = ("stopped", "failed")

Say = Callable[[str], None]


@dataclass(frozen=True)
class GangRequest:
    profile: str
    layout: str
    variant: str
    nodes: tuple[str, ...]
    port: int | None
    gpus: tuple[int, ...] | None
    demo: bool
    timeout_s: float | None
    wait: bool = True
    """Wait for the head's readiness (`up --no-wait`: return once every node runs)."""


class GangStarted(NamedTuple):
    """Where a gang's start ended up: the exit status (0: the head is ready, or runs when
    not waited for) and the head's status as its host's `ps --json` gives it, plus `host`."""

    code: int
    head: dict[str, Any]


def request_of(gang: GangFile, path: Path, timeout_s: float | None) -> GangRequest:
    """The request that started `gang`, to start it again; a file written before the
    request was kept is refused, naming the file and what to do instead."""
    if gang.variant is None:
        dd = ddconsole_command()
        hosts = ",".join(node.host for node in gang.nodes)
        raise StateError(
            f"{path}: this multi-node server's file was written before it kept the request "
            "(variant, port, GPUs) that `restart` needs to start it again",
            hint=f"`{dd} down {gang.id}`, then `{dd} up {gang.profile} --layout {gang.layout} "
            f"--nodes {hosts}` again",
        )
    return GangRequest(
        profile=gang.profile,
        layout=gang.layout,
        variant=gang.variant,
        nodes=tuple(node.host for node in sorted(gang.nodes, key=lambda n: n.rank)),
        port=gang.port if gang.port is not None else _port_of(gang.head_url),
        gpus=None if gang.gpus is None else tuple(gang.gpus),
        demo=gang.demo,
        timeout_s=timeout_s,
    )


def _port_of(url: str) -> int | None:
    """The port the head served on (a gang started without --port comes back on it, so a
    script holding its URL keeps working); None when the URL names none."""
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).port
    except ValueError:
        return None


class Links:
    """One link per host of the gang; every call adds `--demo` when the gang is a demo."""

    def __init__(self, hosts: Sequence[Host], demo: bool) -> None:
        self.links = {host.name: HostLink(host) for host in hosts}
        self.demo = demo

    async def run(self, host: str, args: Sequence[str], timeout_s: float) -> RemoteResult:
        return await self.links[host].run(self.args(args), timeout_s)

    def args(self, args: Sequence[str]) -> list[str]:
        """`args` with the global `--demo` before the verb when the gang is a demo."""
        return ["--demo", *args] if self.demo else list(args)

    async def servers(self, host: str) -> dict[str, dict[str, Any]]:
        """The managed servers of `host` (`ps --json --all` there), by id."""
        result = await self.run(host, ["ps", "--json", "--all"], PS_TIMEOUT_S)
        if result.exit_status != 0:
            raise ConsoleError(f"host {host}: `ddconsole ps` failed: {_last_line(result)}")
        try:
            listed = json.loads(result.stdout)
        except ValueError:
            raise ConsoleError(f"host {host}: `ddconsole ps --json` printed no JSON") from None
        return {s["id"]: s for s in listed if isinstance(s, dict) and not s.get("external")}

    async def close(self) -> None:
        await asyncio.gather(*(link.close() for link in self.links.values()))


def _last_line(result: RemoteResult) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return lines[-1].removeprefix("ddconsole: ").strip() if lines else f"exit {result.exit_status}"


def gang_hosts(nodes: Sequence[str], where: str) -> list[Host]:
    """The hosts of hosts.toml the nodes name (`local` included), each once."""
    hosts = load_hosts()
    found: list[Host] = []
    for name in nodes:
        try:
            host = find_host(hosts, name)
        except UsageError as exc:
            raise UsageError(
                f"{where}: node {name!r} is no host of hosts.toml "
                f"(known: {', '.join(h.name for h in hosts)})",
                hint=exc.hint,
            ) from None
        if host not in found:
            found.append(host)
    return found


def up(request: GangRequest, paths: StatePaths, say: Say, where: str) -> GangStarted:
    """Start the gang and wait for its head."""
    hosts = gang_hosts(request.nodes, where)
    return asyncio.run(_up(request, hosts, paths, say))


async def _up(request: GangRequest, hosts: list[Host], paths: StatePaths, say: Say) -> GangStarted:
    links = Links(hosts, request.demo)
    try:
        # Every host answers before anything starts; the id is free on all of them.
        listed = await asyncio.gather(*(links.servers(h.name) for h in hosts))
        taken = {server for servers in listed for server in servers} | set(gang_ids(paths))
        gang_id = _new_id(request, taken)
        address = await _head_address(links, request.nodes)
        ids = [node_id(gang_id, rank) for rank in range(len(request.nodes))]
        gang = GangFile(
            id=gang_id,
            profile=request.profile,
            layout=request.layout,
            demo=request.demo,
            nodes=[
                GangNode(r, h, i) for r, (h, i) in enumerate(zip(request.nodes, ids, strict=True))
            ],
            created_wall=time.time(),
            variant=request.variant,
            port=request.port,
            gpus=None if request.gpus is None else list(request.gpus),
        )
        path = gang_path(paths, gang_id)
        save(path, gang)
        return await _start(links, request, gang, path, address, say)
    finally:
        await links.close()


async def _start(
    links: Links, request: GangRequest, gang: GangFile, path: Path, address: str, say: Say
) -> GangStarted:
    """Start every node of `gang` (saved at `path`) and its supervisor, then wait for the
    head as the request says."""
    head = await _start_all(links, request, gang, path, address, say)
    gang.head_url = str(head.get("url", ""))
    gang.watcher_pid = start_watcher(path)
    save(path, gang)
    say(f"  {gang.id}: supervisor pid {gang.watcher_pid} stops the gang if a node ends")
    if head.get("state") in TERMINAL:
        return GangStarted(1, head)
    if not request.wait:
        return GangStarted(0, head)
    return await _wait_head(links, request, gang, say)


def _new_id(request: GangRequest, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]", "-", f"{request.profile}-{request.layout}")
    number = 1
    while f"{base}-{number}" in taken:
        number += 1
    return f"{base}-{number}"


async def _head_address(links: Links, nodes: Sequence[str]) -> str:
    """Where every node reaches the head (see the module's docstring)."""
    head = nodes[0]
    if head != LOCAL:
        _, peer = await links.links[head].addresses()
        return peer
    other = next((n for n in nodes if n != LOCAL), None)
    if other is None:
        return "127.0.0.1"
    local, _ = await links.links[other].addresses()
    return local


def node_args(request: GangRequest, gang: GangFile, rank: int, dist_init_addr: str) -> list[str]:
    """The hidden `up` that starts node `rank` on its host."""
    args = [
        "up",
        request.profile,
        "--layout",
        request.layout,
        "--variant",
        request.variant,
        "--no-wait",
        "--json",
        "--gang-id",
        gang.id,
        "--node-rank",
        str(rank),
        "--gang-nodes",
        ",".join(request.nodes),
        "--dist-init-addr",
        dist_init_addr,
    ]
    if rank == 0 and request.port is not None:
        args += ["--port", str(request.port)]
    if request.gpus is not None:
        args += ["--gpus", ",".join(map(str, request.gpus))]
    return args


async def _start_all(
    links: Links, request: GangRequest, gang: GangFile, path: Path, address: str, say: Say
) -> dict[str, Any]:
    """Start every node in rank order; the head's status. A node that does not start stops
    the started ones (ConsoleError saying which and why)."""
    started: list[GangNode] = []
    head: dict[str, Any] = {}
    dist_init_addr = f"{address}:0"  # the head's host picks the port
    for node in gang.nodes:
        args = node_args(request, gang, node.rank, dist_init_addr)
        try:
            result = await links.run(node.host, args, NODE_START_TIMEOUT_S)
            status = json.loads(result.stdout) if result.stdout.strip() else None
            if not isinstance(status, dict) or result.exit_status != 0:
                why = _last_line(result) if not isinstance(status, dict) else status.get("reason")
                raise ConsoleError(str(why or f"exit {result.exit_status}"))
        except (ConsoleError, ValueError) as exc:
            text = exc.message if isinstance(exc, ConsoleError) else f"bad answer: {exc}"
            reason = f"node {node.rank} did not start on {node.host} ({text}); the gang was stopped"
            # The failed node too: it may have started and ended at once.
            await _stop_nodes(links, [*started, node], reason)
            gang.ended_wall, gang.failure = time.time(), reason
            save(path, gang)
            raise ConsoleError(reason) from None
        if node.rank == 0:
            head = {**status, "host": node.host}
            dist_init_addr = str(status.get("dist_init_addr") or dist_init_addr)
        started.append(node)
        say(
            f"{node.id}: node {node.rank} on {node.host}, pid {status.get('pid')}, "
            f"port {status.get('port')}, log {status.get('log_path')} (on {node.host})"
        )
    say(f"  rendezvous at {dist_init_addr}; the head's readiness is the server's")
    return head


async def _stop_nodes(links: Links, nodes: Sequence[GangNode], reason: str) -> None:
    """`down --gang-failure` of each node on its host (LinkDown ignored: nothing to do)."""

    async def one(node: GangNode) -> None:
        try:
            await links.run(
                node.host,
                ["down", node.id, "--gang-failure", reason, "--grace", str(STOP_GRACE_S)],
                NODE_START_TIMEOUT_S,
            )
        except LinkDown:
            pass

    await asyncio.gather(*(one(node) for node in nodes))


async def _wait_head(links: Links, request: GangRequest, gang: GangFile, say: Say) -> GangStarted:
    """Poll the head's host until the head is ready or ended, or the timeout passes."""
    head = gang.nodes[0]
    start = time.monotonic()
    status: dict[str, Any] = {}
    last_phase = None
    while True:
        try:
            servers = await links.servers(head.host)
        except LinkDown as exc:
            say(f"  {exc.message}; still waiting")
            servers = {}
        if head.id in servers:
            status = {**servers[head.id], "host": head.host}
            if status.get("phase") and status.get("phase") != last_phase:
                last_phase = status["phase"]
                say(f"  {time.monotonic() - start:6.1f}s  {last_phase}")
            if status.get("state") == "ready" or status.get("state") in TERMINAL:
                return GangStarted(0 if status["state"] == "ready" else 1, status)
        if request.timeout_s is not None and time.monotonic() - start > request.timeout_s:
            return GangStarted(1, status)
        await asyncio.sleep(READY_POLL_S)


def start_watcher(path: Path) -> int:
    """The detached supervisor of the gang whose file is `path`; its pid."""
    proc = subprocess.Popen(
        [sys.executable, "-m", WATCH_MODULE, str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    return proc.pid


def down(path: Path, *, grace: float, reason: str, say: Say) -> dict[str, Any]:
    """Stop every node of the gang on its host (the lowest rank on each host first: its own
    `down` stops the gang's other nodes there) and end the supervisor. A gang that ended
    already is forgotten: its nodes' records on their hosts and its file here."""
    gang = load(path)
    forget = gang.ended_wall is not None
    if not forget:
        gang.stop_requested_wall = time.time()
        gang.stop_reason = reason
        save(path, gang)
    end_watcher(gang.watcher_pid, path)
    hosts = gang_hosts(gang.hosts, f"{path}")
    return asyncio.run(_down(gang, path, hosts, grace=grace, forget=forget, say=say))


async def _down(
    gang: GangFile, path: Path, hosts: list[Host], *, grace: float, forget: bool, say: Say
) -> dict[str, Any]:
    links = Links(hosts, gang.demo)
    targets = {
        host: [n.id for n in gang.nodes if n.host == host][: None if forget else 1]
        for host in gang.hosts
    }
    try:
        # No --stop-reason: the nodes' own default reason is the user's stop, and a node
        # host on a ddconsole from before that flag would refuse the whole down.
        stopped = await _stop_on_hosts(links, targets, grace, None, say)
    finally:
        await links.close()
    dd = ddconsole_command()
    if stopped.problems:
        head = "not every node was reached" if stopped.unreached else "not every node stopped"
        raise ConsoleError(
            f"{gang.id}: {head}: {'; '.join(stopped.problems)}",
            hint=f"run `{dd} down {gang.id}` again"
            + (" once the hosts answer" if stopped.unreached else ""),
        )
    if forget:
        path.unlink(missing_ok=True)
        say(f"forgot {gang.id} ({gang.failure or 'stopped'})")
        return {"id": gang.id, "result": "forgotten"}
    gang.ended_wall = time.time()
    save(path, gang)
    say(f"stopped {gang.id} on {', '.join(gang.hosts)}")
    return {"id": gang.id, "result": "stopped", "hosts": gang.hosts}


def node_down_args(ids: Sequence[str], grace: float, reason: str | None) -> list[str]:
    """The `down` of a host's nodes; `--stop-reason` only with a reason (restart's), so a
    plain down also stops nodes on a ddconsole from before that flag."""
    args = ["down", *ids, "--gang-node", "--grace", str(grace)]
    return [*args, "--stop-reason", reason] if reason else args


def node_down_problem(host: str, result: RemoteResult) -> str | None:
    """What went wrong in a host's `down` of its nodes; None when it exited 0."""
    if result.exit_status == 0:
        return None
    if any(
        "unrecognized" in line and "--stop-reason" in line for line in result.stderr.splitlines()
    ):
        return (
            f"host {host}: the ddconsole on {host} is older and has no --stop-reason; "
            "nothing was stopped there"
        )
    if not result.stderr.strip():
        # Its lines (said above) tell why: a port still held, a note on the stop.
        return f"host {host}: `ddconsole down` exited {result.exit_status} (see its lines)"
    return f"host {host}: `ddconsole down` failed: {_last_line(result)}"


@dataclass
class NodesStopped:
    """How the stop of a gang's nodes went: a problem per host that failed or was not
    reached, and which of those hosts were not reached at all."""

    problems: list[str]
    unreached: list[str]


async def _stop_on_hosts(
    links: Links, targets: dict[str, list[str]], grace: float, reason: str | None, say: Say
) -> NodesStopped:
    """`down IDS --gang-node` on each host for its ids (a host with none is skipped), all
    hosts at once."""
    stopped = NodesStopped([], [])

    async def on_host(host: str, ids: list[str]) -> None:
        try:
            result = await links.run(
                host, node_down_args(ids, grace, reason), NODE_START_TIMEOUT_S + grace
            )
        except LinkDown as exc:
            stopped.problems.append(exc.message)
            stopped.unreached.append(host)
            return
        for line in result.stdout.splitlines():
            if line.strip():
                say(f"  {host}: {line}")
        problem = node_down_problem(host, result)
        if problem is not None:
            stopped.problems.append(problem)

    await asyncio.gather(*(on_host(host, ids) for host, ids in targets.items() if ids))
    return stopped


def restart(path: Path, *, grace: float, timeout_s: float | None, say: Say) -> GangStarted:
    """Stop every node of the gang as `down` does (reason "restart"), wait until all ended,
    then start it again from its file's request under the same ids, supervisor included,
    and wait for the head."""
    gang = load(path)
    request = request_of(gang, path, timeout_s)
    hosts = gang_hosts(gang.hosts, f"{path}")
    return asyncio.run(_restart(gang, request, path, hosts, grace=grace, say=say))


async def _restart(
    gang: GangFile, request: GangRequest, path: Path, hosts: list[Host], *, grace: float, say: Say
) -> GangStarted:
    links = Links(hosts, request.demo)
    dd = ddconsole_command()
    try:
        # Every host answers before anything stops.
        listed = dict(
            zip(
                gang.hosts,
                await asyncio.gather(*(links.servers(h) for h in gang.hosts)),
                strict=True,
            )
        )
        older = await _older_hosts(links, gang.hosts)
        if older:
            # Checked before anything stops: a host that refused the stop halfway through
            # would leave the gang half stopped, its supervisor already ended.
            raise ConsoleError(
                f"{gang.id} was not restarted (nothing was stopped): the ddconsole on "
                f"{', '.join(older)} is older and cannot stop a node for a restart",
                hint=f"update ddconsole there, or `{dd} down {gang.id}` and `up` it again",
            )
        address = await _head_address(links, request.nodes)
        if gang.ended_wall is None:
            gang.stop_requested_wall = time.time()
            gang.stop_reason = "restart"
            save(path, gang)
        # The old supervisor is gone before the file reads as running again: it must not
        # take the stopped nodes for a failure of the new gang.
        await _end_watcher(gang.watcher_pid, path)
        # Every node its host still lists: a running one is stopped, an ended one forgotten
        # there (its leftover processes stopped first), as `down` does.
        targets = {
            host: [n.id for n in gang.nodes if n.host == host and n.id in listed[host]]
            for host in gang.hosts
        }
        say(f"stopping {gang.id} on {', '.join(gang.hosts)}")
        stopped = await _stop_on_hosts(links, targets, grace, "restart", say)
        if stopped.problems:
            raise ConsoleError(
                f"{gang.id} was not started again: {'; '.join(stopped.problems)}",
                hint=f"`{dd} down {gang.id}`"
                + (" once the hosts answer" if stopped.unreached else "")
                + ", then `restart` or `up`",
            )
        await _wait_ended(links, gang, ENDED_TIMEOUT_S + grace)
        gang.head_url = ""
        gang.watcher_pid = None
        gang.stop_requested_wall = gang.stop_reason = None
        gang.ended_wall = None
        gang.failure = None
        save(path, gang)
        say(f"starting {gang.id} again")
        return await _start(links, request, gang, path, address, say)
    finally:
        await links.close()


async def _older_hosts(links: Links, hosts: Sequence[str]) -> list[str]:
    """The hosts whose ddconsole's `down` has no `--stop-reason` (older than restart of a
    gang across hosts). A host whose help cannot be read is a ConsoleError saying why."""

    async def lacks(host: str) -> bool:
        result = await links.run(host, ["down", "--help"], PS_TIMEOUT_S)
        if result.exit_status != 0:
            raise ConsoleError(f"host {host}: `ddconsole down --help` failed: {_last_line(result)}")
        return "--stop-reason" not in result.stdout

    answers = await asyncio.gather(*(lacks(host) for host in hosts))
    return [host for host, older in zip(hosts, answers, strict=True) if older]


async def _end_watcher(pid: int | None, path: Path) -> None:
    """SIGTERM the supervisor of the gang whose file is `path` and wait until it is gone
    (SIGKILL if it lingers)."""
    import os
    import signal

    end_watcher(pid, path)
    deadline = time.monotonic() + WATCHER_END_S
    while watcher_alive(pid, path):
        if time.monotonic() > deadline - WATCHER_END_S / 2 and pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise ConsoleError(f"the gang's supervisor (pid {pid}) did not end")
        await asyncio.sleep(0.05)


async def _wait_ended(links: Links, gang: GangFile, timeout_s: float) -> None:
    """Until every node is ended (or gone) on its host; ConsoleError naming the nodes that
    still run after `timeout_s`."""

    async def listed(host: str) -> dict[str, dict[str, Any]] | None:
        try:
            return await links.servers(host)
        except ConsoleError:
            return None

    deadline = time.monotonic() + timeout_s
    while True:
        found = dict(zip(gang.hosts, await asyncio.gather(*map(listed, gang.hosts)), strict=True))
        running: list[str] = []
        for node in gang.nodes:
            servers = found[node.host]
            status = None if servers is None else servers.get(node.id)
            # A host that does not answer may still run its node: not ended yet.
            if servers is None or (status is not None and status.get("state") not in TERMINAL):
                running.append(f"{node.id} on {node.host}")
        if not running:
            return
        if time.monotonic() > deadline:
            raise ConsoleError(
                f"{gang.id}: {', '.join(running)} did not end after the stop, so the gang was "
                "not started again",
                hint=f"`{ddconsole_command()} down {gang.id}` stops what is left",
            )
        await asyncio.sleep(READY_POLL_S)
