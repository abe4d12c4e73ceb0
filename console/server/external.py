"""SGLang servers ddconsole did not start: found by their processes, listed as `external`.

What the host scan finds (console.hw.discover) becomes a listable server: its port, host and
model from its argv (SGLang's defaults otherwise), its GPUs from the GPU backend's compute
processes, its actual NUMA binding from its schedulers' CPU affinity, and a state from
`/ready`. Servers ddconsole manages are left out. Nothing here signals a process except
`stop_external`, which only a user naming the server explicitly reaches.
"""

from __future__ import annotations

import concurrent.futures
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.core.errors import StateError
from console.core.redact import redact_argv
from console.hw.backend import GpuBackend, GpuDeviceError, GpuUnavailable
from console.hw.discover import (
    FoundProcess,
    FoundServer,
    process_age_s,
    scan_servers,
)
from console.hw.host import HostReader
from console.hw.numa import NumaNodeInfo
from console.hw.procs import environ_value, is_running, send_signal
from console.hw.sockets import holds_socket, listening_sockets
from console.server.manager import MARKER_ENV, StopReport, probe_ready
from console.server.records import Records
from console.server.status import Probe
from console.telemetry.host_source import HostBackend, measure_cpus, nodes_of

ID_PREFIX = "ext-"
DEFAULT_HOST = "127.0.0.1"
"""sglang 0.5.23 srt/arg_groups/fields/serving.py:65."""
DEFAULT_PORT = 30000
"""sglang 0.5.23 srt/arg_groups/fields/serving.py:66."""
NO_PORT = (
    "no HTTP port: found by its sglang:: processes and its command line names no --port "
    "(an embedded sglang.Engine has none)"
)
"""An `sglang.Engine` in a script or notebook starts the schedulers and the detokenizer but
no HTTP server (sglang 0.5.23 srt/entrypoints/engine.py:248-260); only `launch_server`
runs uvicorn (srt/entrypoints/http_server.py:2988-2999)."""
FLAGS = {
    "--host": "host",
    "--port": "port",
    "--model-path": "model_path",
    "--model": "model_path",  # alias, sglang 0.5.23 srt/arg_groups/fields/model.py:55
    "--served-model-name": "served_model_name",
    "--tp-size": "tp_size",
    "--tensor-parallel-size": "tp_size",  # alias, srt/arg_groups/fields/parallel.py:49
    "--dp-size": "dp_size",
    "--data-parallel-size": "dp_size",  # alias, srt/arg_groups/fields/parallel.py:77
}
"""The flags read from a leader's argv (exact spellings and SGLang's own aliases)."""


def parse_args(argv: Sequence[str], how: str) -> dict[str, str]:
    """The values of FLAGS in a server's argv, `--flag value` or `--flag=value`; the last
    one wins, as with argparse. `sglang serve MODEL` takes the model as its first argument
    once every `--model-type X` is taken out (sglang 0.5.23 cli/serve.py:36-66)."""
    args = list(argv)
    found: dict[str, str] = {}
    if how == "serve" and "serve" in args:
        rest: list[str] = []
        skip = False
        for arg in args[args.index("serve") + 1 :]:
            if skip or arg.startswith("--model-type="):
                skip = False
            elif arg == "--model-type":
                skip = True
            else:
                rest.append(arg)
        if rest and not rest[0].startswith("-"):
            found["model_path"] = rest[0]
    for index, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        key = FLAGS.get(name)
        if key is None:
            continue
        if equals:
            found[key] = value
        elif index + 1 < len(args) and not args[index + 1].startswith("--"):
            found[key] = args[index + 1]
    return found


@dataclass(frozen=True)
class ExternalServer:
    """An SGLang server on this host that ddconsole did not start."""

    pid: int
    start_ticks: int
    host: str
    port: int | None
    """None: unknown, the server has no HTTP port we know of (see NO_PORT)."""
    model: str | None
    served_model_name: str | None
    tp: int | None
    dp: int | None
    found_by: str
    argv: tuple[str, ...]
    processes: tuple[FoundProcess, ...]
    """Its retitled processes (pid, start time, title)."""
    scheduler_pids: tuple[int, ...]
    gpus: tuple[int, ...] = ()
    numa_nodes: tuple[int, ...] = ()
    """Where its schedulers may actually run (NUMA nodes of their CPU affinity)."""
    state: str = "running"
    reason: str | None = None
    uptime_s: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    port_holder: str | None = None
    """Who else listens on its port (a managed server, another external, another process):
    what answers there is not this server, so it is neither probed nor polled."""

    @property
    def id(self) -> str:
        return f"{ID_PREFIX}{self.pid}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}" if self.port is not None else "no HTTP port"

    @property
    def url(self) -> str | None:
        if self.port is None:
            return None
        host = self.host
        if host in ("0.0.0.0", "", "*"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def own_url(self) -> str | None:
        """Its URL when what answers there is this server: what to probe and poll."""
        return self.url if self.port_holder is None else None

    @property
    def all_pids(self) -> tuple[int, ...]:
        return (self.pid, *(p.pid for p in self.processes))

    @property
    def layout(self) -> str:
        if self.tp is None and self.dp is None:
            return "-"
        text = f"tp{self.tp or 1}"
        return text + (f"-dp{self.dp}" if self.dp and self.dp > 1 else "")

    def to_json(self) -> dict[str, Any]:
        """The keys `ps --json` gives a managed server where they apply, plus what only an
        external one has; argv secrets are masked."""
        return {
            "id": self.id,
            "external": True,
            "profile": "external",
            "layout": self.layout,
            "variant": "-",
            "state": self.state,
            "reason": self.reason,
            "pid": self.pid,
            "host": self.host,
            "port": self.port,
            "url": self.url,
            "port_holder": self.port_holder,
            "model": self.model,
            "served_model_name": self.served_model_name,
            "gpus": list(self.gpus),
            "numa_nodes": list(self.numa_nodes),
            "scheduler_pids": list(self.scheduler_pids),
            "processes": [{"pid": p.pid, "title": p.title} for p in self.processes],
            "uptime_s": self.uptime_s,
            "found_by": self.found_by,
            "argv": redact_argv(self.argv),
            "notes": list(self.notes),
        }


def listing_json(server: ExternalServer) -> dict[str, Any]:
    """`to_json()` plus the masked argv as a `plan`, the shape screens and recordings list
    servers in."""
    data = server.to_json()
    data["plan"] = {"argv": data["argv"]}
    return data


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def from_found(found: FoundServer) -> ExternalServer:
    args = parse_args(found.argv, found.how)
    tp, dp = _int(args.get("tp_size")), _int(args.get("dp_size"))
    if tp is None and found.scheduler_pids:
        # No --tp-size in its argv: one scheduler per TP rank of each DP replica.
        tp = max(1, len(found.scheduler_pids) // (dp or 1))
    notes = []
    port = _int(args.get("port"))
    if "port" in args and port is None:
        notes.append(f"--port {args['port']!r} is not a number; assumed {DEFAULT_PORT}")
    if port is None and ("port" in args or found.how != "children"):
        # A server entry without --port listens on SGLang's default.
        port = DEFAULT_PORT
    return ExternalServer(
        pid=found.pid,
        start_ticks=found.start_ticks,
        host=args.get("host") or DEFAULT_HOST,
        port=port,
        model=args.get("model_path"),
        served_model_name=args.get("served_model_name"),
        tp=tp,
        dp=dp,
        found_by=found.how,
        argv=found.argv,
        processes=found.children,
        scheduler_pids=found.scheduler_pids,
        uptime_s=process_age_s(found.start_ticks),
        notes=tuple(notes),
    )


def state_of(probe: Probe, server: ExternalServer) -> tuple[str, str | None]:
    """A state word from `/ready`: SGLang binds its port only once the schedulers are up,
    and `/ready` answers 200 only after warmup (sglang 0.5.23 srt/entrypoints/engine.py:
    994-1010, http_server.py:714-718)."""
    where = f"{server.url}/ready"
    if probe is Probe.READY:
        return "ready", None
    if probe is Probe.NOT_READY:
        return "warming", "/ready 503 (warming up, or draining)"
    if probe is Probe.TIMEOUT:
        return "unresponsive", f"{where} timed out"
    if probe is Probe.REFUSED:
        state = "loading" if server.scheduler_pids else "starting"
        return state, f"nothing answers on {where} yet"
    return "running", None


def unprobed_reason(server: ExternalServer) -> str | None:
    """Why a server is not probed (its state stays `running`), None when it is."""
    if server.port is None:
        return NO_PORT
    if server.port_holder is not None:
        return f"port {server.port} is held by {server.port_holder}: not probed, not polled"
    return None


class ExternalScanner:
    """Scans the host for external servers. `gpus` are the GPU indices `gpu_holders` asks
    the backend about; the scan itself never calls the GPU backend (its calls belong on
    the backend's own executor), it takes the holders read there."""

    def __init__(
        self,
        records: Records,
        gpu_backend: GpuBackend | None,
        gpus: Sequence[int] = (),
        *,
        probe_timeout: float = 0.5,
        host: HostBackend | None = None,
    ) -> None:
        self.records = records
        self.host = host
        """Measures the schedulers' CPUs as the host source does (the demo's simulated
        host, or this host's affinity when None)."""
        self.gpu_backend = gpu_backend
        self.gpus = tuple(gpus)
        self.probe_timeout = probe_timeout
        self._nodes: tuple[NumaNodeInfo, ...] | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._last: dict[tuple[int, int], ExternalServer] = {}

    def close(self) -> None:
        if self._pool is not None:
            # Not waiting: a probe of a hung server ends by its own timeout.
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def managed_leaders(self) -> set[int]:
        """Leader pids of the servers this state dir launched, from every spawn record (one
        whose state file is unreadable too). Each runs in its own session, so the pid is
        also the session id of all its processes."""
        try:
            spawned = [p.name for p in self.records.paths.servers.glob("*.spawn.json")]
        except OSError:
            return set()
        pids = set()
        for name in spawned:
            spawn = self.records.spawn(name[: -len(".spawn.json")])
            if spawn is not None:
                pids.add(spawn.pid)
        return pids

    def managed_ports(self) -> dict[int, str]:
        """Port -> id of every server of this state dir whose leader still runs."""
        ports = {}
        for server_id in self.records.ids():
            spawn = self.records.spawn(server_id)
            if spawn is None or not is_running(spawn.pid, spawn.start_ticks):
                continue
            try:
                ports[self.records.load(server_id).plan.port] = server_id
            except StateError:
                continue
        return ports

    def scan(
        self, *, probe: bool = True, holders: Mapping[int, set[int]] | None = None
    ) -> list[ExternalServer]:
        """Every external server now. Without `probe`, states are the last probe's; without
        `holders` (GPU index -> compute-process pids, from `gpu_holders`), GPUs are the last
        scan's."""
        managed = self.managed_leaders()
        servers = [
            from_found(found)
            for found in scan_servers()
            if found.pid not in managed
            and found.sid not in managed
            # A leader ddconsole launched carries its marker (SGLang never retitles the
            # leader, so its environ keeps it), whichever state dir launched it.
            and environ_value(found.pid, MARKER_ENV) is None
        ]
        servers = self._with_gpus(servers, holders)
        servers = [self._with_numa(s) for s in servers]
        servers = self._with_port_holders(servers)
        servers = self._probed(servers) if probe else [self._previous_state(s) for s in servers]
        self._last = {(s.pid, s.start_ticks): s for s in servers}
        return servers

    def gpu_holders(self) -> dict[int, set[int]] | None:
        """GPU index -> pids of its compute processes, None when the backend is unavailable.
        Blocking calls of the GPU backend: run on its own executor."""
        if not self.gpus or self.gpu_backend is None:
            return {}
        try:
            self.gpu_backend.open()
        except GpuUnavailable:
            return None
        holders: dict[int, set[int]] = {}
        for gpu in self.gpus:
            try:
                holders[gpu] = {p.pid for p in self.gpu_backend.compute_processes(gpu)}
            except GpuDeviceError:
                continue
        return holders

    def _with_gpus(
        self, servers: list[ExternalServer], holders: Mapping[int, set[int]] | None
    ) -> list[ExternalServer]:
        result = []
        for server in servers:
            if holders is None:
                before = self._last.get((server.pid, server.start_ticks))
                result.append(_replace(server, gpus=before.gpus) if before else server)
                continue
            # SGLang's schedulers own the CUDA contexts (sglang 0.5.23
            # srt/managers/scheduler.py:6362); the leader is checked too, for servers
            # that keep the model in the leader.
            pids = set(server.all_pids)
            gpus = tuple(sorted(g for g, held in holders.items() if held & pids))
            result.append(_replace(server, gpus=gpus))
        return result

    def _with_port_holders(self, servers: list[ExternalServer]) -> list[ExternalServer]:
        """Marks a server whose port another process listens on (two servers started
        without --port both claim 30000; only one can bind it): the kernel's socket table
        says who holds it. Where its descriptors cannot be read (another user's server),
        a port that a managed server or another external also claims is not its own."""
        if not any(s.port is not None for s in servers):
            return servers
        listening = listening_sockets()
        managed = self.managed_ports()
        claims: dict[int, int] = {}
        for server in servers:
            if server.port is not None:
                claims[server.port] = claims.get(server.port, 0) + 1
        holds: dict[str, bool | None] = {}
        for server in servers:
            inodes = listening.get(server.port) if server.port is not None else None
            holds[server.id] = holds_socket(server.all_pids, inodes) if inodes else None
        # A port another server of this host claims too; an unreadable server on it is
        # then not known to hold it.
        result = []
        for server in servers:
            port = server.port
            held = holds[server.id]
            shared = port in managed or (port is not None and claims.get(port, 0) > 1)
            if port not in listening or held is True or (held is None and not shared):
                # Nobody listens there yet (its probe says so), or it does itself.
                result.append(server)
                continue
            owner = next(
                (o.id for o in servers if o.port == port and holds[o.id] and o is not server),
                None,
            )
            if owner is not None:
                holder = f"external {owner}"
            elif port in managed:
                holder = f"managed server {managed[port]}"
            else:
                holder = "another process"
            result.append(_replace(server, port_holder=holder))
        return result

    def _with_numa(self, server: ExternalServer) -> ExternalServer:
        """NUMA binding applies to the schedulers only; the leader and the detokenizer stay
        unbound (sglang 0.5.23 srt/entrypoints/engine.py:956-960, numa_utils.py:28-68)."""
        if not server.scheduler_pids:
            return server
        if self.host is None:
            self.host = HostReader()
        measured = measure_cpus(self.host, server.scheduler_pids)
        if measured is None:
            return server
        if self._nodes is None:
            self._nodes = self.host.numa_nodes()
        return _replace(server, numa_nodes=nodes_of(measured[0], self._nodes))

    def _probed(self, servers: list[ExternalServer]) -> list[ExternalServer]:
        def one(server: ExternalServer) -> ExternalServer:
            url = server.own_url
            if url is None:
                return _replace(server, state="running", reason=unprobed_reason(server))
            state, reason = state_of(probe_ready(url, self.probe_timeout), server)
            return _replace(server, state=state, reason=reason)

        if len(servers) <= 1:
            return [one(s) for s in servers]
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(4, "ddconsole-external")
        return list(self._pool.map(one, servers))

    def _previous_state(self, server: ExternalServer) -> ExternalServer:
        before = self._last.get((server.pid, server.start_ticks))
        if before is None:
            return _replace(server, reason=unprobed_reason(server))
        return _replace(server, state=before.state, reason=before.reason)


def _replace(server: ExternalServer, **changes: Any) -> ExternalServer:
    from dataclasses import replace

    return replace(server, **changes)


@dataclass
class ExternalStopReport(StopReport):
    """A managed server's stop report (its summary too), plus the processes left."""

    remaining: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "result": "stopped" if not self.remaining else "still running",
            "external": True,
            "sigterm": self.sent_sigterm,
            "sigkill": self.escalated,
            "seconds": self.seconds,
            "remaining": self.remaining,
        }


def stop_external(
    server: ExternalServer, *, grace: float, poll_s: float = 0.1
) -> ExternalStopReport:
    """SIGTERM the leader (SGLang drains, then ends its children: sglang 0.5.23
    srt/managers/tokenizer_manager.py:3508-3573), wait `grace`, then SIGKILL whatever of it
    is left. Each signal goes only to the same process that was found (pid + start time)."""
    start = time.monotonic()
    report = ExternalStopReport(server.id)
    found = {c.pid: c.start_ticks for c in (*server.processes, *_children_now(server))}
    found[server.pid] = server.start_ticks
    if send_signal(server.pid, signal.SIGTERM, server.start_ticks):
        report.sent_sigterm = True
        deadline = time.monotonic() + grace
        while is_running(server.pid, server.start_ticks) and time.monotonic() < deadline:
            time.sleep(poll_s)
    left = {pid: ticks for pid, ticks in found.items() if is_running(pid, ticks)}
    if left:
        report.escalated = True
        for pid, ticks in left.items():
            if send_signal(pid, signal.SIGKILL, ticks):
                report.killed_pids.append(pid)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(is_running(p, t) for p, t in left.items()):
            time.sleep(poll_s)
        report.remaining = [p for p, t in left.items() if is_running(p, t)]
        if report.remaining:
            report.notes.append(f"processes still present: {report.remaining}")
    report.seconds = time.monotonic() - start
    return report


def _children_now(server: ExternalServer) -> tuple[FoundProcess, ...]:
    """Its retitled processes as a scan sees them now (the listed ones may be older)."""
    for found in scan_servers():
        if found.pid == server.pid and found.start_ticks == server.start_ticks:
            return found.children
    return ()
