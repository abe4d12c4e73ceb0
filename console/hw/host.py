"""Host readings through psutil: CPU per CPU, memory, load, and where a process may run.

Every call is None-safe (psutil can fail or return None on odd hosts) and blocking-cheap, but
still belongs on an executor, not the UI loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from console.hw.numa import NumaNodeInfo, read_numa_nodes


@dataclass(frozen=True, slots=True)
class HostReading:
    per_cpu_pct: tuple[float, ...] | None
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    load: tuple[float, float, float] | None


class HostReader:
    """This host through psutil; cpu_percent(interval=None) needs a first call as baseline."""

    def __init__(self) -> None:
        try:
            psutil.cpu_percent(percpu=True, interval=None)
        except (psutil.Error, OSError):
            pass

    def read(self) -> HostReading:
        try:
            per_cpu = tuple(float(v) for v in psutil.cpu_percent(percpu=True, interval=None))
        except (psutil.Error, OSError):
            per_cpu = None
        try:
            memory = psutil.virtual_memory()
            used: int | None = int(memory.total - memory.available)
            total: int | None = int(memory.total)
        except (psutil.Error, OSError):
            used = total = None
        try:
            load = os.getloadavg()
        except OSError:
            load = None
        return HostReading(per_cpu or None, used, total, load)

    def numa_nodes(self) -> tuple[NumaNodeInfo, ...]:
        return read_numa_nodes()

    def process_cpus(self, pid: int) -> set[int] | None:
        """The CPUs one process may run on (its affinity), or None when it cannot be read.
        Callers ask per process: SGLang binds its schedulers only, so a union over a server's
        whole tree would include the unbound leader and detokenizer (sglang 0.5.23
        srt/utils/numa_utils.py:28-68, srt/entrypoints/engine.py:956-960)."""
        try:
            return set(os.sched_getaffinity(pid))
        except OSError:
            return None


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def own_rss_bytes() -> int | None:
    try:
        return int(psutil.Process().memory_info().rss)
    except (psutil.Error, OSError):
        return None
