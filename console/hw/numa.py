"""NUMA nodes and their CPUs from sysfs, with a sane answer on single-node or odd hosts."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from console.core.units import parse_index_set

SYS_NODE_DIR = Path("/sys/devices/system/node")
SYS_PCI_DIR = Path("/sys/bus/pci/devices")


@dataclass(frozen=True, slots=True)
class NumaNodeInfo:
    id: int
    cpus: tuple[int, ...]
    memory_total_bytes: int | None


def _all_cpus() -> tuple[int, ...]:
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return tuple(range(os.cpu_count() or 1))


def read_numa_nodes(node_dir: Path = SYS_NODE_DIR) -> tuple[NumaNodeInfo, ...]:
    """Every `nodeN` with its cpulist and MemTotal; one node with all CPUs if sysfs says nothing."""
    nodes: list[NumaNodeInfo] = []
    try:
        entries = sorted(node_dir.iterdir()) if node_dir.is_dir() else []
    except OSError:
        entries = []
    for entry in entries:
        match = re.fullmatch(r"node(\d+)", entry.name)
        if not match:
            continue
        try:
            cpus = parse_index_set((entry / "cpulist").read_text())
        except (OSError, ValueError):
            continue
        nodes.append(NumaNodeInfo(int(match.group(1)), cpus, _node_memory(entry)))
    if not nodes or not any(node.cpus for node in nodes):
        return (NumaNodeInfo(0, _all_cpus(), None),)
    return tuple(sorted(nodes, key=lambda node: node.id))


def _node_memory(entry: Path) -> int | None:
    try:
        text = (entry / "meminfo").read_text()
    except OSError:
        return None
    match = re.search(r"MemTotal:\s+(\d+)\s*kB", text)
    return int(match.group(1)) * 1024 if match else None


def pci_numa_node(bus_id: str | None, pci_dir: Path = SYS_PCI_DIR) -> int | None:
    """The NUMA node sysfs reports for a PCI device; `-1` (firmware said nothing) -> None."""
    if not bus_id:
        return None
    # NVML reports 8 hex digits of domain; sysfs uses 4 (0000:3b:00.0).
    match = re.fullmatch(
        r"(?:[0-9a-fA-F]*?)([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)", bus_id.strip()
    )
    if not match:
        return None
    try:
        value = int((pci_dir / match.group(1).lower() / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return value if value >= 0 else None
