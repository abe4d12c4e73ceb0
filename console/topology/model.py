"""Frozen description of a host: GPUs with their NUMA node and links, NUMA nodes with CPUs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class GpuInfo:
    index: int
    name: str
    uuid: str | None
    bus_id: str | None
    memory_total_bytes: int | None
    numa_node: int | None
    cpu_affinity: tuple[int, ...]
    pcie_gen_current: int | None
    pcie_gen_max: int | None
    pcie_width_current: int | None
    pcie_width_max: int | None
    error: str | None = None
    """Why this GPU's facts could not be read (it still exists on the host)."""

    @property
    def link_downtrained(self) -> bool:
        """Link width below its maximum (generation drops at idle are normal power saving)."""
        return (
            self.pcie_width_current is not None
            and self.pcie_width_max is not None
            and self.pcie_width_current < self.pcie_width_max
        )


@dataclass(frozen=True, slots=True)
class NumaNode:
    id: int
    cpus: tuple[int, ...]
    memory_total_bytes: int | None
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class Topology:
    source: str
    """`nvml`, `simulated`, or `none`."""
    gpus: tuple[GpuInfo, ...]
    numa_nodes: tuple[NumaNode, ...]
    gpu_status: str | None = None
    """None when GPUs could be enumerated; else why not (`no GPUs: NVML library not found`)."""
    driver_version: str | None = None

    def gpu(self, index: int) -> GpuInfo | None:
        for gpu in self.gpus:
            if gpu.index == index:
                return gpu
        return None

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        return tuple(gpu.index for gpu in self.gpus)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "gpu_status": self.gpu_status,
            "driver_version": self.driver_version,
            "gpus": [asdict(gpu) | {"link_downtrained": gpu.link_downtrained} for gpu in self.gpus],
            "numa_nodes": [asdict(node) for node in self.numa_nodes],
        }
