"""Host telemetry: CPU per NUMA node, memory, load, and each managed server's real binding.

The binding is measured on the server's scheduler processes only: SGLang binds them and
nothing else, the leader (HTTP, tokenizer) and the detokenizer stay on every CPU (sglang
0.5.23 srt/entrypoints/engine.py:956-960, srt/utils/numa_utils.py:28-68). A server whose
schedulers are not found (yet) has no binding reading: unknown, not a mismatch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from console.hw.discover import schedulers_under
from console.hw.host import HostReading
from console.hw.numa import NumaNodeInfo
from console.hw.procs import is_running
from console.telemetry.blocking import BlockingCaller, Stalled
from console.telemetry.keys import SourceId
from console.telemetry.samples import Binding, HostSample, NumaLoad, SourceState, SourceStatus
from console.telemetry.source import PollResult


class HostBackend(Protocol):
    def read(self) -> HostReading: ...

    def numa_nodes(self) -> tuple[NumaNodeInfo, ...]: ...

    def process_cpus(self, pid: int) -> set[int] | None: ...


@dataclass(frozen=True)
class WatchedServer:
    """A server whose binding is checked: its leader pid and intended NUMA nodes."""

    server_id: str
    pid: int
    intended_nodes: tuple[int, ...]


def measure_cpus(backend: HostBackend, pids: Iterable[int]) -> tuple[set[int], int] | None:
    """Where these processes may run: the union of their CPUs and how many were read, None
    when none could be. The one NUMA measurement, for managed and external servers alike;
    pass schedulers only (SGLang binds nothing else)."""
    cpus: set[int] = set()
    measured = 0
    for pid in pids:
        found = backend.process_cpus(pid)
        if found is not None:
            cpus |= found
            measured += 1
    return (cpus, measured) if measured else None


def nodes_of(cpus: set[int], nodes: Iterable[NumaNodeInfo]) -> tuple[int, ...]:
    """The NUMA nodes that hold any of `cpus`."""
    return tuple(sorted(node.id for node in nodes if cpus & set(node.cpus)))


RESCAN_S = 10.0
MISS_RESCAN_S = 2.0


class HostSource:
    name = SourceId.HOST

    def __init__(
        self,
        backend: HostBackend,
        *,
        interval_s: float = 1.0,
        servers: Callable[[], list[WatchedServer]] | None = None,
    ) -> None:
        self.backend = backend
        self.interval_s = interval_s
        self.servers = servers or (lambda: [])
        self.caller = BlockingCaller("host", interval_s * 0.8)
        self._nodes: tuple[NumaNodeInfo, ...] | None = None
        self._schedulers: dict[int, tuple[float, list[tuple[int, int]]]] = {}
        """Leader pid -> (when found, [(pid, start ticks)] of its schedulers)."""

    def schedulers_of(self, leaders: list[int]) -> dict[int, list[int]]:
        """Each leader's scheduler pids. A /proc scan costs a read per process on the host,
        so it is one scan for every leader due, and a found set is kept RESCAN_S while all
        its members live (same pid and start time), an empty answer MISS_RESCAN_S (SGLang's
        schedulers retitle themselves seconds after the spawn)."""
        now = time.monotonic()
        result: dict[int, list[int]] = {}
        due = []
        for leader in leaders:
            cached = self._schedulers.get(leader)
            if cached is not None:
                found_at, found = cached
                fresh = now - found_at < (RESCAN_S if found else MISS_RESCAN_S)
                if fresh and all(is_running(pid, ticks) for pid, ticks in found):
                    result[leader] = [pid for pid, _ in found]
                    continue
            due.append(leader)
        if due:
            for leader, procs in schedulers_under(due).items():
                self._schedulers[leader] = (now, [(p.pid, p.start_ticks) for p in procs])
                result[leader] = [p.pid for p in procs]
        return result

    def _read(
        self, watched: list[WatchedServer]
    ) -> tuple[
        HostReading, tuple[NumaNodeInfo, ...], list[tuple[WatchedServer, tuple[set[int], int]]]
    ]:
        if self._nodes is None:
            self._nodes = self.backend.numa_nodes()
        schedulers = self.schedulers_of([server.pid for server in watched])
        bindings = []
        for server in watched:
            measured = measure_cpus(self.backend, schedulers.get(server.pid, []))
            if measured is not None:
                bindings.append((server, measured))
        live = {server.pid for server in watched}
        for leader in [pid for pid in self._schedulers if pid not in live]:
            del self._schedulers[leader]
        return self.backend.read(), self._nodes, bindings

    async def poll(self, now: float) -> PollResult:
        watched = self.servers()
        try:
            reading, nodes, bindings = await self.caller.call(lambda: self._read(watched))
        except Stalled as exc:
            return PollResult(
                statuses=[
                    SourceStatus(
                        name=self.name,
                        state=SourceState.STALLED,
                        reason=f"host call still running ({exc.seconds:.1f} s)",
                    )
                ]
            )
        numa = []
        for node in nodes:
            values = [
                reading.per_cpu_pct[c]
                for c in node.cpus
                if reading.per_cpu_pct is not None and c < len(reading.per_cpu_pct)
            ]
            numa.append(
                NumaLoad(
                    node=node.id,
                    cpu_pct=sum(values) / len(values) if values else None,
                    cpus=len(node.cpus),
                )
            )
        truth = tuple(
            Binding(
                server_id=server.server_id,
                intended_nodes=server.intended_nodes,
                actual_nodes=nodes_of(cpus, nodes),
                actual_cpus=len(cpus),
                processes=count,
            )
            for server, (cpus, count) in bindings
        )
        per_cpu = reading.per_cpu_pct
        sample = HostSample(
            t_mono=now,
            source=self.name,
            cpu_pct=sum(per_cpu) / len(per_cpu) if per_cpu else None,
            numa=tuple(numa),
            mem_used_bytes=reading.mem_used_bytes,
            mem_total_bytes=reading.mem_total_bytes,
            load1=reading.load[0] if reading.load else None,
            load5=reading.load[1] if reading.load else None,
            load15=reading.load[2] if reading.load else None,
            bindings=truth,
        )
        state = SourceState.OK if per_cpu is not None else SourceState.DEGRADED
        reason = None if per_cpu is not None else "per-CPU load unavailable"
        return PollResult(
            [sample], [SourceStatus(name=self.name, state=state, reason=reason, last_ok_mono=now)]
        )

    async def close(self) -> None:
        self.caller.close()
