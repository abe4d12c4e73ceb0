"""Launch, follow, stop and forget managed servers; any console process can do it."""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from console.core.errors import ConsoleError, StateError, UsageError
from console.core.net import free_port, port_is_free
from console.core.paths import StatePaths
from console.core.via_host import ddconsole_command
from console.hw.backend import GpuBackend, GpuDeviceError, GpuUnavailable
from console.hw.discover import Membership, member_processes
from console.hw.procs import (
    ProcessInfo,
    cmdline,
    is_running,
    process_info,
    send_signal,
    wall_to_ticks,
)
from console.hw.simload import SIM_GPU_DIR_ENV
from console.profiles.models import LOCAL_NODE
from console.server.gang import node_id as gang_node_id
from console.server.gateway_plan import READY_PATH as GATEWAY_READY_PATH
from console.server.gateway_plan import gateway_layout, is_gateway
from console.server.lock import launch_lock
from console.server.milestones import LogFollower, milestone
from console.server.preflight import PreflightResult, preflight
from console.server.records import Records, ServerRecord, SpawnInfo
from console.server.status import Probe, ServerState, ServerStatus, derive
from console.topology.nodes import node_plans
from console.topology.placement import Plan, next_free_port

MARKER_ENV = "DDCONSOLE_SERVER"
SPT_NOENV = "SPT_NOENV"
"""Keeps setproctitle from overwriting the environ area, so SGLang's retitled children keep
the marker readable (setproctitle 1.3.8 README, "SPT_NOENV"; sglang 0.5.23
srt/managers/scheduler.py:6294). The title must then fit in the command line, and a spawn
child's (`python -c "from multiprocessing.spawn import spawn_main; ..." --multiprocessing-fork`)
is longer than any SGLang title. Discovery does not rely on it: see `server_processes`."""
DEFAULT_GRACE_S = 30.0
WAITER_MODULE = "console.server.waiter"
EXIT_SLACK_S = 1.0
"""Allowance for the wall clock (and its conversion to boot ticks) when a session member's
start is compared with its leader's recorded exit: a member started before the leader died."""
POLL_S = 0.1
NODE_GRACE_S = 10.0
"""The grace of a gang's non-head node, stopped after its head: it only logs SIGTERM and
ends when the head's shutdown reaches it (sglang 0.5.23 srt/entrypoints/engine.py:1262-1273)."""


def _unwritable(root: object, exc: OSError) -> StateError:
    return StateError(
        f"not launching: cannot write the state directory {root} ({exc.strerror or exc})",
        hint="free space there, make it writable, or set XDG_STATE_HOME to another directory",
    )


class LaunchRefused(UsageError):
    """Preflight found a conflict; nothing was started."""

    def __init__(self, result: PreflightResult) -> None:
        lines = "\n  ".join(result.refusals)
        super().__init__(f"refused before launching:\n  {lines}")
        self.result = result


@dataclass
class StopReport:
    id: str
    sent_sigterm: bool = False
    escalated: bool = False
    killed_pids: list[int] = field(default_factory=list)
    seconds: float = 0.0
    port_free: bool | None = None
    gpus_released: bool | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """Problems that did not keep the server from stopping (a state file left unwritten)."""
    nodes: list[str] = field(default_factory=list)
    """The other nodes of a multi-node server, one summary each."""

    def summary(self) -> str:
        how = "SIGTERM" if self.sent_sigterm else "already exited"
        if self.escalated:
            how += ", then SIGKILL to its processes"
        parts = [f"stopped {self.id} ({how}, {self.seconds:.1f} s)"]
        if self.port_free is not None:
            parts.append("port free" if self.port_free else "port STILL IN USE")
        if self.gpus_released is not None:
            parts.append(
                "GPU memory released" if self.gpus_released else "GPU memory NOT released yet"
            )
        lines = self.nodes + self.notes + self.warnings
        return "; ".join(parts) + "".join(f"\n  {line}" for line in lines)


Event = Callable[[float, str], None]


def _ignore(elapsed: float, text: str) -> None:
    return None


def _prefixed(on_event: Event, name: str) -> Event:
    """`on_event` with each text prefixed by a node's id."""

    def event(elapsed: float, text: str) -> None:
        on_event(elapsed, f"{name}: {text}")

    return event


def probe_ready(url: str, timeout: float, path: str = "/ready") -> Probe:
    """GET `url``path` (/ready) on a fresh connection. The standard library's client: the watcher
    probes every live server every second, and httpx costs three times the CPU per probe."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(
        parts.hostname or "127.0.0.1", parts.port, timeout=timeout
    )
    # `timeout` bounds each socket call; a peer that trickles its status line a byte at a
    # time would pass every one of them. The timer bounds the whole probe.
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        sock = connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        connection.request("GET", parts.path.rstrip("/") + path)
        status = connection.getresponse().status
    except TimeoutError:
        return Probe.TIMEOUT
    except (OSError, http.client.HTTPException):
        return Probe.TIMEOUT if expired.is_set() else Probe.REFUSED
    finally:
        timer.cancel()
        connection.close()
    return Probe.READY if status == 200 else Probe.NOT_READY


class ServerManager:
    """The headless service behind `up`, `ps`, `down`, `switch`, `logs` and the TUI."""

    def __init__(
        self,
        paths: StatePaths,
        gpu_backend: GpuBackend,
        *,
        demo: bool,
        environ: Mapping[str, str] | None = None,
        probe_timeout: float = 0.5,
    ) -> None:
        self.paths = paths
        self.records = Records(paths)
        self.gpu_backend = gpu_backend
        self.demo = demo
        self.environ = dict(os.environ if environ is None else environ)
        self.probe_timeout = probe_timeout
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def close(self) -> None:
        """Stop the probe threads (a probe still running finishes first)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    # -- reading ---------------------------------------------------------------------------

    def marker(self, server_id: str) -> str:
        return f"{self.paths.root}:{server_id}"

    def load_records(self) -> tuple[list[ServerRecord], list[str]]:
        """All readable records, plus one line per file that cannot be read."""
        records, problems = [], []
        for server_id in self.records.ids():
            try:
                records.append(self.records.load(server_id))
            except StateError as exc:
                problems.append(str(exc))
        return records, problems

    def probe(self, record: ServerRecord) -> Probe:
        # A non-head node serves only SGLang's dummy health server (/ping, /health,
        # /health_generate: sglang 0.5.23 srt/utils/common.py:3624-3648).
        path = "/health" if record.is_node else "/ready"
        if is_gateway(record.plan):
            path = GATEWAY_READY_PATH
        return probe_ready(record.url, self.probe_timeout, path)

    def statuses(
        self, *, probe: bool = True, orphan_scan: bool = True
    ) -> tuple[list[ServerStatus], list[str]]:
        records, problems = self.load_records()
        records = [r for r in records if not r.forgotten]

        def one(record: ServerRecord) -> ServerStatus:
            return self._status_of(record, probe, orphan_scan)

        if len(records) > 1 and probe:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(8, "ddconsole-probe")
            result = list(self._pool.map(one, records))
        else:
            result = [one(r) for r in records]
        return sorted(result, key=lambda s: s.record.launched_wall), problems

    def status(self, server_id: str, *, probe: bool = True) -> ServerStatus:
        return self._status_of(self.records.load(server_id), probe)

    def _status_of(
        self, record: ServerRecord, probe: bool, orphan_scan: bool = True
    ) -> ServerStatus:
        spawn = self.records.spawn(record.id)
        alive = (
            spawn is not None
            and self.records.exit(record.id) is None
            and is_running(spawn.pid, spawn.start_ticks)
        )
        status = derive(
            record, self.records, self.probe(record) if probe and alive else Probe.SKIPPED
        )
        if status.state is ServerState.READY and not record.ever_ready:
            record.ever_ready = True
            self._save_quietly(record)
        if status.state.terminal and orphan_scan:
            orphans = tuple(p.pid for p in self.server_processes(record.id, spawn))
            if orphans:
                reason = (
                    f"{status.reason or status.state.value}; {len(orphans)} of its "
                    "processes still running"
                )
                status = replace(status, orphans=orphans, reason=reason)
        return status

    def resolve_id(self, text: str) -> str:
        """An exact id, or a unique prefix of one."""
        ids = self.records.ids()
        if text in ids:
            return text
        matches = [i for i in ids if i.startswith(text)]
        if len(matches) == 1:
            return matches[0]
        if not ids:
            raise UsageError(f"no server {text!r}: no managed servers")
        hint = "ambiguous" if matches else "unknown"
        raise UsageError(f"{hint} server {text!r}; servers: {', '.join(ids)}")

    def _membership(self, server_id: str, spawn: SpawnInfo | None) -> Membership:
        """The waiter starts the leader in a new session (start_new_session), so the
        session id is the leader's pid. The session is trusted only with a real leader
        identity (pid > 1, a recorded start time) whose pid is gone or still that leader:
        a pid running another program means the session is not ours. Members must start
        within the leader's lifetime (see Membership), so a reused pid's session is not
        taken for ours."""
        marker = self.marker(server_id)
        if spawn is None or spawn.pid <= 1 or spawn.start_ticks <= 0:
            return Membership(marker)
        spawned = wall_to_ticks(spawn.spawned_wall)
        if spawned is not None and spawned < 0:
            # Written before this boot: its pid and start time name nothing of this one.
            return Membership(marker)
        info = process_info(spawn.pid)
        if info is not None and info.start_ticks != spawn.start_ticks:
            return Membership(marker)
        ended = None
        if info is None or info.state in ("Z", "X"):
            exit_info = self.records.exit(server_id)
            if exit_info is not None:
                ended = wall_to_ticks(exit_info.ended_wall + EXIT_SLACK_S)
        return Membership(marker, spawn.pid, spawn.start_ticks, ended)

    def server_processes(self, server_id: str, spawn: SpawnInfo | None = None) -> list[ProcessInfo]:
        """Every live process of a server: its session (SGLang's retitled children lose the
        marker when SPT_NOENV is unset) or its marker, the waiter left out."""
        if spawn is None:
            spawn = self.records.spawn(server_id)
        waiter = spawn.waiter_pid if spawn else None
        found = member_processes(MARKER_ENV, {server_id: self._membership(server_id, spawn)})
        members = [p for p in found[server_id] if p.pid != waiter]
        if spawn is None:
            # No readable spawn record names the waiter: known by its command line.
            members = [p for p in members if WAITER_MODULE not in cmdline(p.pid)]
        return members

    def managed_processes(self) -> dict[int, str]:
        """Every process of every managed server, pid -> server id (one pass over /proc),
        so preflight never takes our own schedulers for foreign GPU holders."""
        wanted, waiters = {}, set()
        for server_id in self.records.ids():
            spawn = self.records.spawn(server_id)
            wanted[server_id] = self._membership(server_id, spawn)
            if spawn is not None:
                waiters.add(spawn.waiter_pid)
        found = member_processes(MARKER_ENV, wanted)
        return {
            p.pid: server_id
            for server_id, procs in found.items()
            for p in procs
            if p.pid not in waiters
        }

    def _save_quietly(self, record: ServerRecord) -> None:
        try:
            self.records.save(record)
        except OSError:
            pass

    # -- launching -------------------------------------------------------------------------

    def _new_id(self, plan: Plan) -> str:
        base = re.sub(r"[^A-Za-z0-9._-]", "-", f"{plan.profile}-{plan.layout}")
        taken = set(self.records.ids())
        number = 1
        while f"{base}-{number}" in taken:
            number += 1
        return f"{base}-{number}"

    def _launch_env(self, plan: Plan, server_id: str) -> dict[str, str]:
        env = dict(self.environ)
        env.update(plan.env)
        env[MARKER_ENV] = self.marker(server_id)
        env[SPT_NOENV] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        if self.demo:
            env[SIM_GPU_DIR_ENV] = str(self.paths.sim_gpu)
            env.setdefault("DDCONSOLE_SIM_SPEED", self.environ.get("DDCONSOLE_SIM_SPEED", "1"))
        return env

    def launch(
        self, plan: Plan, *, interpreter: str | None = None, server_id: str | None = None
    ) -> ServerRecord:
        """Preflight and start `plan` detached; returns once the process exists. A
        multi-node plan starts every node (console.server.gang) and returns the head's record."""
        if plan.nodes:
            return self._launch_gang(plan, interpreter, server_id)
        gateway = gateway_layout(plan)
        if gateway is not None:
            from console.server.gateway import launch_group

            return launch_group(
                self,
                plan,
                gateway,
                gateway_id=server_id or self._new_id(plan),
                interpreter=interpreter,
                launch_one=lambda one, program, one_id: self._launch_one(
                    one, interpreter=program, server_id=one_id
                ),
                marker_env=MARKER_ENV,
            )
        return self._launch_one(plan, interpreter=interpreter, server_id=server_id)

    def _launch_gang(
        self, plan: Plan, interpreter: str | None, server_id: str | None
    ) -> ServerRecord:
        """Start the head, then each node; a node that cannot start stops those started."""
        remote = [n for n in plan.nodes if n != LOCAL_NODE]
        if remote:
            dd = ddconsole_command()
            raise UsageError(
                f"layout {plan.layout!r}: node {remote[0]!r} is not this host; nodes on other "
                f"hosts are started by `{dd} up` (each on its host over SSH)",
                hint=f"`{dd} up {plan.profile} --layout {plan.layout}` starts the gang again; "
                "`restart GANG_ID` on the console host that started it restarts every node "
                "(`switch` runs only `local` nodes)",
            )
        if not self.demo:
            raise UsageError(
                f"layout {plan.layout!r} runs {len(plan.nodes)} nodes on this one host: a real "
                "SGLang needs a host per node",
                hint="try it in demo mode (--demo), where the nodes share the simulated GPUs",
            )
        head_id = server_id or self._new_id(plan)
        ids = [gang_node_id(head_id, rank) for rank in range(len(plan.nodes))]
        taken = {s.record.plan.port for s in self.statuses(probe=False)[0] if not s.state.terminal}
        host = plan.host if plan.host not in ("0.0.0.0", "::") else "127.0.0.1"
        ports = [plan.port]
        for rank in range(1, len(plan.nodes)):
            port = next_free_port(plan.port + rank, host, taken={*taken, *ports})
            if port is None:
                raise UsageError(f"no free port after {plan.port} for node {rank}")
            ports.append(port)
        dist_port = free_port(host)
        started: list[ServerRecord] = []
        try:
            for node_plan, node_id in zip(node_plans(plan, dist_port, ports), ids, strict=True):
                started.append(
                    self._launch_one(
                        node_plan, interpreter=interpreter, server_id=node_id, gang=ids
                    )
                )
        except BaseException as exc:
            reason = f"node {len(started)} did not start ({exc}); the gang was stopped"
            for record in started:
                with contextlib.suppress(ConsoleError):
                    self.stop(record.id, grace=DEFAULT_GRACE_S, reason=reason, gang=False)
            raise
        return started[0]

    def launch_node(
        self, plan: Plan, *, server_id: str, gang: list[str], interpreter: str | None = None
    ) -> ServerRecord:
        """Start one node of a gang whose other nodes run on other hosts (each host's
        ddconsole starts its own node: console.fleet.gang_up); returns once it runs."""
        return self._launch_one(plan, interpreter=interpreter, server_id=server_id, gang=gang)

    def _launch_one(
        self,
        plan: Plan,
        *,
        interpreter: str | None = None,
        server_id: str | None = None,
        gang: list[str] | None = None,
    ) -> ServerRecord:
        plan = plan.with_secrets()  # a plan from a record (restart) holds `***` for secrets
        self.paths.ensure()
        with launch_lock(self.paths.locks / "launch.lock"):
            statuses, _ = self.statuses(probe=False)
            # A gang's nodes share this host's GPUs in demo mode: not each other's conflict.
            mates = set(gang or ())
            active = [
                s
                for s in statuses
                if not s.state.terminal and s.id != server_id and s.id not in mates
            ]
            check = preflight(
                plan,
                active,
                self.gpu_backend,
                managed=self.managed_processes(),
                interpreter=None if self.demo else interpreter,
            )
            if not check.ok:
                raise LaunchRefused(check)
            server_id = server_id or self._new_id(plan)
            stamp = time.strftime("%Y%m%d-%H%M%S")
            log_path = self.paths.logs / f"{server_id}.{stamp}.log"
            record = ServerRecord(
                id=server_id,
                plan=plan,
                log_path=str(log_path),
                launched_wall=time.time(),
                launched_by_pid=os.getpid(),
                notes=check.warnings,
                gang=list(gang or ()),
            )
            argv = plan.launch_argv(self.environ)
            try:
                self.records.remove(server_id)
                self.records.save(record)
                with log_path.open("ab") as log:
                    log.write(f"ddconsole: launching {server_id}: {plan.command_line}\n".encode())
            except OSError as exc:
                try:
                    self.records.remove(server_id)
                except OSError:
                    pass
                raise _unwritable(self.paths.root, exc) from None
            # The waiter forks itself away (--detach), so this returns at once and the
            # console keeps no child to reap.
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    WAITER_MODULE,
                    "--detach",
                    str(self.paths.servers),
                    server_id,
                    str(log_path),
                    "--",
                    *argv,
                ],
                env=self._launch_env(plan, server_id),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
                check=False,
                timeout=30,
            )
            deadline = time.monotonic() + 10
            while self.records.spawn(server_id) is None and self.records.exit(server_id) is None:
                if time.monotonic() > deadline:
                    raise ConsoleError(f"{server_id}: the server process did not start in 10 s")
                time.sleep(0.02)
        return record

    def wait(
        self,
        server_id: str,
        *,
        timeout: float | None = None,
        on_event: Event = _ignore,
        cancelled: Callable[[], bool] | None = None,
    ) -> ServerStatus:
        """Follow a starting server until ready or dead; report milestones as they appear.

        `cancelled` is polled every tick: once it returns True the wait ends with the
        server's current (not ready) status, as a timeout does; the caller decides what
        happens to the server (a campaign being stopped stops it)."""
        record = self.records.load(server_id)
        follower = LogFollower(record.log_path)
        start = time.monotonic()
        seen: set[str] = set()
        next_probe = 0.0
        while True:
            elapsed = time.monotonic() - start
            for line in follower.read_new_lines():
                found = milestone(line)
                if found and found.label not in seen:
                    seen.add(found.label)
                    on_event(elapsed, found.label)
            status = self.status(server_id, probe=False)
            if is_gateway(record.plan):
                from console.server.gateway import settle_start

                # A gateway's start ends with its replicas: all failed, or it failed itself.
                settled = settle_start(self, status, elapsed, on_event)
                if settled is not None:
                    return settled
            if status.state.terminal:
                return status
            if status.state is ServerState.READY:
                return self.status(server_id, probe=True)
            # SGLang says when it warms up; a gateway is ready once it routes to a worker.
            probing = status.state is ServerState.WARMING or is_gateway(record.plan)
            if probing and elapsed >= next_probe:
                next_probe = elapsed + 0.2
                if self.probe(record) is Probe.READY:
                    ready = self.status(server_id, probe=True)
                    if is_gateway(record.plan):
                        from console.server.gateway import report_failed_replicas

                        report_failed_replicas(self, server_id, elapsed, on_event)
                    return ready
            if timeout is not None and elapsed > timeout:
                return status
            if cancelled is not None and cancelled():
                return status
            time.sleep(POLL_S)

    # -- stopping --------------------------------------------------------------------------

    def stop(
        self,
        server_id: str,
        *,
        grace: float = DEFAULT_GRACE_S,
        reason: str = "stopped by the user",
        on_event: Event = _ignore,
        gang: bool = True,
        group: bool = True,
    ) -> StopReport:
        """SIGTERM the leader, wait `grace`, SIGKILL everything of its session, verify. A
        node of a gang stops the whole gang (`gang=False`: this node only), head first:
        its shutdown ends the other nodes, as SGLang's ShutdownReq does. A gateway stops its
        replicas, and a replica leaves its gateway first (`group=False`: this one only)."""
        record = self.records.load(server_id)
        if gang and record.gang:
            return self._stop_gang(record, grace=grace, reason=reason, on_event=on_event)
        if group:
            from console.server.gateway import group_of, stop_group

            replicas = group_of(self.paths, server_id)
            if replicas is not None:
                return stop_group(
                    self,
                    replicas,
                    server_id,
                    lambda one: self.stop(
                        one,
                        grace=grace,
                        reason=reason,
                        on_event=_prefixed(on_event, one) if one != server_id else on_event,
                        group=False,
                    ),
                )
        start = time.monotonic()
        report = StopReport(server_id)
        # The stop request is recorded before the signal when the disk allows it (so the exit
        # reads "stopped", not "killed by SIGTERM"); a full or read-only state dir never
        # keeps the signal from being sent: the write is retried, and reported, after.
        unrecorded: OSError | None = None
        if record.stop_requested_wall is None:
            record.stop_requested_wall = time.time()
            record.stop_reason = reason
            record.stop_requested_by_pid = os.getpid()
            try:
                self.records.save(record)
            except OSError as exc:
                unrecorded = exc
        spawn = self.records.spawn(server_id)
        # Taken before anything dies: the schedulers, not the leader, hold the GPUs, and the
        # release check must follow every one of them.
        holders = {p.pid for p in self.server_processes(server_id, spawn)}
        if spawn is not None and send_signal(spawn.pid, signal.SIGTERM, spawn.start_ticks):
            report.sent_sigterm = True
            on_event(time.monotonic() - start, f"SIGTERM to pid {spawn.pid}")
            deadline = time.monotonic() + grace
            while is_running(spawn.pid, spawn.start_ticks) and time.monotonic() < deadline:
                time.sleep(POLL_S)
        elif spawn is None:
            # The leader is unknown (no readable spawn record): every process of the server
            # gets the SIGTERM and the grace period, as a leader would.
            termed = self._terminate(
                self.server_processes(server_id, spawn),
                grace,
                lambda text: on_event(time.monotonic() - start, text),
            )
            report.sent_sigterm = bool(termed)
        leftovers = self.server_processes(server_id, spawn)
        if leftovers:
            report.escalated = True
            on_event(
                time.monotonic() - start,
                f"SIGKILL to {len(leftovers)} process(es): "
                + ", ".join(str(p.pid) for p in leftovers),
            )
            for proc in leftovers:
                if send_signal(proc.pid, signal.SIGKILL, proc.start_ticks):
                    report.killed_pids.append(proc.pid)
        deadline = time.monotonic() + 10
        while self.server_processes(server_id, spawn) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        remaining = [p.pid for p in self.server_processes(server_id, spawn)]
        if remaining:
            report.notes.append(f"processes still present: {remaining}")
        # The waiter records the exit; give it a moment so the state reads "stopped".
        deadline = time.monotonic() + 3
        while (
            spawn is not None
            and self.records.exit(server_id) is None
            and is_running(spawn.waiter_pid, None)
            and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        report.port_free = self._wait_port_free(record.plan, 5.0)
        holders |= {p.pid for p in leftovers} | ({spawn.pid} if spawn else set())
        report.gpus_released = self._wait_gpus_released(record.plan, holders, 10.0)
        if unrecorded is not None:
            try:
                self.records.save(record)
            except OSError as exc:
                report.warnings.append(
                    f"warning: the stop could not be recorded in "
                    f"{self.records.record_path(server_id)} "
                    f"({exc.strerror or exc}); the server is down regardless"
                )
        report.seconds = time.monotonic() - start
        return report

    def _stop_gang(
        self, record: ServerRecord, *, grace: float, reason: str, on_event: Event
    ) -> StopReport:
        """Every node's stop is recorded first, so none of their exits reads as a failure
        that stops the rest; then each node is stopped, the head first."""
        nodes: list[ServerRecord] = []
        for node in record.gang:
            try:
                other = record if node == record.id else self.records.load(node)
            except StateError:
                continue
            if other.stop_requested_wall is None:
                other.stop_requested_wall = time.time()
                other.stop_reason = reason
                other.stop_requested_by_pid = os.getpid()
                self._save_quietly(other)
            nodes.append(other)
        reports = []
        for node_record in nodes:
            node_grace = grace if node_record.id == record.gang[0] else NODE_GRACE_S
            reports.append(
                self.stop(
                    node_record.id,
                    grace=node_grace,
                    reason=reason,
                    on_event=_prefixed(on_event, node_record.id),
                    gang=False,
                )
            )
        mine = next((r for r in reports if r.id == record.id), reports[0])
        for other_report in reports:
            if other_report is mine:
                continue
            mine.nodes.append(other_report.summary())
            mine.notes += other_report.notes
            mine.killed_pids += other_report.killed_pids
            mine.escalated = mine.escalated or other_report.escalated
            if other_report.port_free is False:
                mine.port_free = False
        return mine

    def _wait_port_free(self, plan: Plan, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not port_is_free(plan.port, plan.host):
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)
        return True

    def _wait_gpus_released(self, plan: Plan, pids: set[int], timeout: float) -> bool | None:
        try:
            self.gpu_backend.open()
        except GpuUnavailable:
            return None
        deadline = time.monotonic() + timeout
        while True:
            held = False
            for gpu in plan.gpus:
                try:
                    procs = self.gpu_backend.compute_processes(gpu)
                except GpuDeviceError:
                    continue
                if any(p.pid in pids for p in procs):
                    held = True
            if not held:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)

    def _terminate(
        self, procs: list[ProcessInfo], grace: float, on_event: Callable[[str], None]
    ) -> list[int]:
        """SIGTERM `procs`, then wait up to `grace` for them to end; the pids that got it."""
        sent = [p for p in procs if send_signal(p.pid, signal.SIGTERM, p.start_ticks)]
        if not sent:
            return []
        on_event(f"SIGTERM to {len(sent)} process(es): " + ", ".join(str(p.pid) for p in sent))
        deadline = time.monotonic() + grace
        while any(is_running(p.pid, p.start_ticks) for p in sent) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        return [p.pid for p in sent]

    def stop_unreadable(
        self, server_id: str, *, grace: float = DEFAULT_GRACE_S, on_event: Event = _ignore
    ) -> str:
        """For a record that cannot be read: SIGTERM every process of its session or marker,
        SIGKILL what is left after `grace`, remove its files once its waiter is done."""
        start = time.monotonic()
        spawn = self.records.spawn(server_id)
        termed = self._terminate(
            self.server_processes(server_id, spawn),
            grace,
            lambda text: on_event(time.monotonic() - start, text),
        )
        leftovers = self.server_processes(server_id, spawn)
        if leftovers:
            on_event(
                time.monotonic() - start,
                f"SIGKILL to {len(leftovers)} process(es): "
                + ", ".join(str(p.pid) for p in leftovers),
            )
        killed = set(termed)
        for proc in leftovers:
            if send_signal(proc.pid, signal.SIGKILL, proc.start_ticks):
                killed.add(proc.pid)
        # The waiter writes ID.exit.json when the server ends: let it, then remove that too.
        deadline = time.monotonic() + 5
        while spawn is not None and is_running(spawn.waiter_pid, None):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        done = f"killed {sorted(killed)}; " if killed else ""
        try:
            self.records.remove(server_id)
        except OSError as exc:
            return f"{done}warning: its state files could not be removed ({exc.strerror or exc})"
        return f"{done}state files removed"

    def forget(self, server_id: str) -> None:
        """Drop the files of a server that is no longer running (its log stays)."""
        try:
            self.records.remove(server_id)
        except OSError as exc:
            raise StateError(
                f"cannot forget {server_id}: its state files cannot be removed "
                f"({exc.strerror or exc})",
                hint="free space in the state directory or make it writable",
            ) from None

    def conflicts(self, plan: Plan) -> list[ServerStatus]:
        """Active managed servers that hold the plan's GPUs or port."""
        statuses, _ = self.statuses(probe=False)
        return [
            s
            for s in statuses
            if not s.state.terminal
            and (set(s.record.plan.gpus) & set(plan.gpus) or s.record.plan.port == plan.port)
        ]
