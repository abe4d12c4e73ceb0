"""Host readings through psutil: CPU per CPU, memory, load, and where processes may run.

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

    def process_cpus(self, pid: int) -> tuple[set[int], int] | None:
        return process_tree_cpus(pid)


def process_tree_cpus(pid: int) -> tuple[set[int], int] | None:
    """Union of the CPU affinity of a process and its descendants, and how many there are."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except (psutil.Error, OSError):
        return None
    cpus: set[int] = set()
    counted = 0
    for process in processes:
        try:
            cpus |= set(process.cpu_affinity() or [])
            counted += 1
        except (psutil.Error, OSError, AttributeError):
            continue
    return (cpus, counted) if counted else None


def own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def own_rss_bytes() -> int | None:
    try:
        return int(psutil.Process().memory_info().rss)
    except (psutil.Error, OSError):
        return None
