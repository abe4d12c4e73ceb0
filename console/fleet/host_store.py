"""Each remote host's telemetry as a `TimeSeriesStore`, fed from the fleet's readings.

A reading (one line of `metrics --watch --json`, docs/metrics.schema.json) is turned back
into the samples and source states it was written from and put through the poller's own
write path, so a remote host's store holds the same series names as the local one and the
screens that draw the local store draw a remote one unchanged. Points are timed by this
console's monotonic clock when the reading arrived (a remote host's clock is not ours).

The reading comes from another machine, possibly another ddconsole version: a field that
is missing or malformed is left unknown, never an error.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from console.telemetry.keys import SourceId
from console.telemetry.poller import write_result
from console.telemetry.samples import (
    Binding,
    CostSample,
    GpuSample,
    HostSample,
    NumaLoad,
    Sample,
    ServerSample,
    SourceState,
    SourceStatus,
)
from console.telemetry.source import PollResult
from console.telemetry.store import DEFAULT_CAPACITY, TimeSeriesStore
from console.topology.model import GpuInfo, NumaNode, Topology

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet
    from console.fleet.summary import HostSummary

STALE = "stale"
"""A host summary's state once its link is lost (console.fleet.link's, not imported here:
that module loads the SSH stack)."""

HOST_CAPACITY = DEFAULT_CAPACITY
"""Points kept per series: the local store's one hour at the fleet's one reading a second."""
HOST_MAX_SERIES = 512
"""Series kept per host (8 GPUs x 5, the host, its NUMA nodes and the console take ~50;
each server 5-8 more and its poll time): at 16 bytes a point, at most 29.5 MB a host
however long it runs. Once full, the series of the server gone longest make room."""
POINT_BYTES = 16
HOSTS_BUDGET_BYTES = 8 * HOST_MAX_SERIES * HOST_CAPACITY * POINT_BYTES
"""What every host's store together may hold at most (236 MB): up to 8 hosts each keeps
its hour; with more, each keeps a shorter history so the total stays within this."""
HOST_MIN_CAPACITY = 300
"""The shortest history a host keeps however many hosts there are (5 minutes): past about
100 hosts the total grows again, by 2.5 MB a host at most."""


def host_capacity(hosts: int, max_series: int = HOST_MAX_SERIES) -> int:
    """Points kept per series of each of `hosts` stores: an hour while the budget allows,
    less with many hosts, never under HOST_MIN_CAPACITY."""
    if hosts <= 0:
        return HOST_CAPACITY
    fits = HOSTS_BUDGET_BYTES // (hosts * max_series * POINT_BYTES)
    return max(HOST_MIN_CAPACITY, min(HOST_CAPACITY, fits))


READING_SOURCE = "reading"
"""A remote host's `Topology.source`: what its latest reading says, not a discovery."""
NOT_IN_A_READING = (
    "PCIe bus ids",
    "each GPU's CPU affinity",
    "the CPU ids and memory of each NUMA node",
    "the driver version",
)
"""What a reading does not carry that a local topology has."""


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _ints(value: object) -> tuple[int, ...]:
    return tuple(v for v in _list(value) if isinstance(v, int) and not isinstance(v, bool))


def _state(value: object) -> SourceState:
    try:
        return SourceState(str(value))
    except ValueError:
        return SourceState.UNAVAILABLE


def _status(raw: object, t_mono: float) -> SourceStatus | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        return None
    try:
        name = SourceId.parse(raw["name"])
    except ValueError:
        return None
    state = _state(raw.get("state"))
    return SourceStatus(
        name=name,
        state=state,
        reason=_text(raw.get("reason")),
        last_ok_mono=t_mono if state is SourceState.OK else None,
        last_poll_s=None if (ms := _number(raw.get("last_poll_ms"))) is None else ms / 1000,
    )


def _gpu(raw: dict[str, Any], t_mono: float) -> GpuSample | None:
    index = _int(raw.get("index"))
    if index is None or index < 0 or "util_pct" not in raw:
        return None  # a GPU the source could not read: its state is among the sources
    throttle = raw.get("throttle_reasons")
    return GpuSample(
        t_mono=t_mono,
        source=SourceId.gpu(index),
        index=index,
        name=_text(raw.get("name")),
        util_pct=_number(raw.get("util_pct")),
        mem_util_pct=_number(raw.get("mem_util_pct")),
        mem_used_bytes=_int(raw.get("mem_used_bytes")),
        mem_total_bytes=_int(raw.get("mem_total_bytes")),
        power_w=_number(raw.get("power_w")),
        power_limit_w=_number(raw.get("power_limit_w")),
        temp_c=_number(raw.get("temp_c")),
        sm_clock_mhz=_number(raw.get("sm_clock_mhz")),
        mem_clock_mhz=_number(raw.get("mem_clock_mhz")),
        pcie_tx_bytes_s=_number(raw.get("pcie_tx_bytes_s")),
        pcie_rx_bytes_s=_number(raw.get("pcie_rx_bytes_s")),
        pcie_gen_current=_int(raw.get("pcie_gen_current")),
        pcie_gen_max=_int(raw.get("pcie_gen_max")),
        pcie_width_current=_int(raw.get("pcie_width_current")),
        pcie_width_max=_int(raw.get("pcie_width_max")),
        throttle_reasons=tuple(r for r in throttle if isinstance(r, str))
        if isinstance(throttle, list)
        else None,
        numa_node=_int(raw.get("numa_node")),
    )


def _host(raw: object, t_mono: float) -> HostSample | None:
    if not isinstance(raw, dict):
        return None
    load = [_number(v) for v in _list(raw.get("load"))] + [None, None, None]
    numa = tuple(
        NumaLoad(node=node, cpu_pct=_number(n.get("cpu_pct")), cpus=_int(n.get("cpus")) or 0)
        for n in _list(raw.get("numa_nodes"))
        if isinstance(n, dict) and (node := _int(n.get("node"))) is not None
    )
    bindings = tuple(
        Binding(
            server_id=b["server_id"],
            intended_nodes=_ints(b.get("intended_nodes")),
            actual_nodes=_ints(b.get("actual_nodes")),
            actual_cpus=_int(b.get("actual_cpus")) or 0,
            processes=_int(b.get("processes")) or 0,
        )
        for b in _list(raw.get("bindings"))
        if isinstance(b, dict) and isinstance(b.get("server_id"), str)
    )
    return HostSample(
        t_mono=t_mono,
        source=SourceId.HOST,
        cpu_pct=_number(raw.get("cpu_pct")),
        numa=numa,
        mem_used_bytes=_int(raw.get("mem_used_bytes")),
        mem_total_bytes=_int(raw.get("mem_total_bytes")),
        load1=load[0],
        load5=load[1],
        load15=load[2],
        bindings=bindings,
    )


def _server(raw: dict[str, Any], t_mono: float) -> ServerSample | None:
    """A live server's figures; None for a stopped or failed one (a reading keeps those
    apart under `last`, as no figure of now)."""
    server_id = raw.get("id")
    if not isinstance(server_id, str) or not server_id or raw.get("live") is False:
        return None
    latency = _dict(raw.get("latency"))
    bounds = []
    for name in ServerSample.LATENCY:
        found = latency.get(name.removesuffix("_s"))
        lower = _number(found.get("lower_s")) if isinstance(found, dict) else None
        if isinstance(found, dict) and lower is not None:
            bounds.append((name, lower, _number(found.get("upper_s"))))
    return ServerSample(
        t_mono=t_mono,
        source=SourceId.server(server_id),
        server_id=server_id,
        decode_tok_s=_number(raw.get("tok_s")),
        finished_tok_s=_number(raw.get("finished_tok_s")),
        requests_s=_number(raw.get("requests_s")),
        gen_throughput=_number(raw.get("gen_throughput")),
        running=_number(raw.get("running")),
        queued=_number(raw.get("queued")),
        token_usage=_number(raw.get("token_usage")),
        accept_length=_number(raw.get("accept_length")),
        accept_rate=_number(raw.get("accept_rate")),
        ttft_p50_s=_number(raw.get("ttft_p50_s")),
        ttft_p99_s=_number(raw.get("ttft_p99_s")),
        itl_p50_s=_number(raw.get("itl_p50_s")),
        itl_p99_s=_number(raw.get("itl_p99_s")),
        e2e_p50_s=_number(raw.get("e2e_p50_s")),
        e2e_p99_s=_number(raw.get("e2e_p99_s")),
        spec_verify_s=None,
        latency_scope=_text(latency.get("scope")),
        latency_window_s=_number(latency.get("window_s")),
        latency_bounds=tuple(bounds),
    )


def _cost(raw: object, t_mono: float) -> CostSample | None:
    if not isinstance(raw, dict):
        return None
    poll_ms = _dict(raw.get("poll_ms"))
    return CostSample(
        t_mono=t_mono,
        source=SourceId.CONSOLE,
        cpu_pct=_number(raw.get("cpu_pct")),
        rss_bytes=_int(raw.get("rss_bytes")),
        poll_ms=tuple(
            (str(name), ms) for name, value in poll_ms.items() if (ms := _number(value)) is not None
        ),
    )


def reading_result(reading: dict[str, Any], t_mono: float) -> PollResult:
    """The samples and source states a reading was written from, timed `t_mono`."""
    samples: list[Sample] = []
    for raw in _list(reading.get("gpus")):
        gpu = _gpu(raw, t_mono) if isinstance(raw, dict) else None
        if gpu is not None:
            samples.append(gpu)
    for sample in (_host(reading.get("host"), t_mono), _cost(reading.get("console"), t_mono)):
        if sample is not None:
            samples.append(sample)
    for raw in _list(reading.get("servers")):
        server = _server(raw, t_mono) if isinstance(raw, dict) else None
        if server is not None:
            samples.append(server)
    statuses = [
        status
        for raw in _list(reading.get("sources"))
        if (status := _status(raw, t_mono)) is not None
    ]
    return PollResult(samples=samples, statuses=statuses)


def feed(store: TimeSeriesStore, reading: dict[str, Any], t_mono: float) -> None:
    """Write one reading into `store` as the poller writes a poll, and commit it. A server
    or GPU the reading no longer lists loses its latest sample (its history stays until
    the store is full and needs the room)."""
    result = reading_result(reading, t_mono)
    listed = {s.source for s in result.samples} | {s.name for s in result.statuses}
    for source in store.statuses().keys() | store.latest_all().keys():
        if source not in listed:
            store.forget_source(source)
    write_result(store, result)
    store.commit()


def mark_stale(store: TimeSeriesStore, reason: str) -> None:
    """Every source of a host whose link is lost: stale with the link's reason (its last
    figures stay, shown as not current)."""
    for status in store.statuses().values():
        if (status.state, status.reason) != (SourceState.STALE, reason):
            store.set_status(dataclasses.replace(status, state=SourceState.STALE, reason=reason))
    store.commit()


def reading_topology(reading: dict[str, Any] | None) -> Topology:
    """The GPUs and NUMA nodes as a reading gives them (`NOT_IN_A_READING` left unknown:
    no bus ids, CPU affinity, CPU ids or node memory)."""
    if reading is None:
        return Topology(READING_SOURCE, (), (), gpu_status="no reading from this host yet")
    gpus = []
    for raw in _list(reading.get("gpus")):
        if not isinstance(raw, dict) or (index := _int(raw.get("index"))) is None:
            continue
        gpus.append(
            GpuInfo(
                index=index,
                name=_text(raw.get("name")) or "?",
                uuid=None,
                bus_id=None,
                memory_total_bytes=_int(raw.get("mem_total_bytes")),
                numa_node=_int(raw.get("numa_node")),
                cpu_affinity=(),
                pcie_gen_current=_int(raw.get("pcie_gen_current")),
                pcie_gen_max=_int(raw.get("pcie_gen_max")),
                pcie_width_current=_int(raw.get("pcie_width_current")),
                pcie_width_max=_int(raw.get("pcie_width_max")),
                error=_text(raw.get("reason")) if "util_pct" not in raw else None,
            )
        )
    host = reading.get("host")
    nodes = []
    for raw in _list(host.get("numa_nodes") if isinstance(host, dict) else None):
        if isinstance(raw, dict) and (node := _int(raw.get("node"))) is not None:
            listed = _ints(raw.get("gpus"))
            on_node = listed or tuple(g.index for g in gpus if g.numa_node == node)
            nodes.append(NumaNode(id=node, cpus=(), memory_total_bytes=None, gpus=on_node))
    gpus.sort(key=lambda g: g.index)
    sources = [s for s in _list(reading.get("sources")) if isinstance(s, dict)]
    gpu_source = next((s for s in sources if s.get("name") == "gpu"), None)
    status = None
    if not gpus:
        status = (_text(gpu_source.get("reason")) if gpu_source else None) or "no GPUs listed"
    return Topology(READING_SOURCE, tuple(gpus), tuple(nodes), gpu_status=status)


def _port(url: str | None) -> int | None:
    try:
        return urlsplit(url).port if url else None
    except ValueError:  # a port out of range or not a number
        return None


def reading_servers(reading: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A reading's server entries, each with `numa_nodes` (its intended nodes, from the
    host's bindings), `port` (from its URL) and `external` added where known."""
    if reading is None:
        return []
    host = reading.get("host")
    intended = {
        b["server_id"]: list(_ints(b.get("intended_nodes")))
        for b in _list(host.get("bindings") if isinstance(host, dict) else None)
        if isinstance(b, dict) and isinstance(b.get("server_id"), str)
    }
    entries = []
    for raw in _list(reading.get("servers")):
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
            continue
        entry = dict(raw)
        entry["gpus"] = list(_ints(raw.get("gpus")))
        entry["numa_nodes"] = intended.get(raw["id"], [])
        entry.setdefault("external", raw["id"].startswith("ext-"))
        entry["port"] = _port(_text(raw.get("url")))
        entries.append(entry)
    return entries


@dataclass
class HostStore:
    """One remote host's store and the reading last written into it."""

    name: str
    store: TimeSeriesStore
    reading: dict[str, Any] | None = None
    fed_mono: float | None = None
    """This console's clock when the latest reading was written (None: none yet)."""
    stale_reason: str | None = None


class HostStores:
    """A store per remote host of a fleet, fed as its readings arrive (`Fleet.subscribe`)
    from the moment this is made, shown or not, so a host's history is there when it is
    picked. `close()` stops the feeding."""

    def __init__(
        self,
        fleet: Fleet,
        *,
        capacity: int | None = None,
        max_series: int = HOST_MAX_SERIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fleet = fleet
        self.clock = clock
        remote = [host for host in fleet.hosts if not host.is_local]
        if capacity is None:
            capacity = host_capacity(len(remote), max_series)
        self.capacity = capacity
        """Points kept per series (one a second): an hour, shorter with many hosts."""
        self._hosts = {
            host.name: HostStore(host.name, TimeSeriesStore(capacity, max_series))
            for host in fleet.hosts
            if not host.is_local
        }
        for name in self._hosts:  # readings that came before this was made
            self._take(name, fleet.summary(name))
        self._unsubscribe = fleet.subscribe(self._on_change)

    def names(self) -> list[str]:
        return list(self._hosts)

    def get(self, name: str) -> HostStore | None:
        return self._hosts.get(name)

    def close(self) -> None:
        self._unsubscribe()

    def _on_change(self, summary: HostSummary) -> None:
        if summary.name in self._hosts:
            self._take(summary.name, summary)

    def _take(self, name: str, summary: HostSummary) -> None:
        host = self._hosts[name]
        reading = self.fleet.reading(name)
        if reading is not None and reading is not host.reading:
            host.reading = reading
            host.fed_mono = self.clock()
            host.stale_reason = None
            feed(host.store, reading, host.fed_mono)
        if summary.state == STALE:
            # Each source says only that the host is stale; the title and the feed note
            # carry the link's reason once.
            reason = summary.reason or "link lost"
            if reason != host.stale_reason:
                host.stale_reason = reason
                mark_stale(host.store, f"host {name} stale")
