"""Build a Topology from a GPU backend and the host's NUMA nodes."""

from __future__ import annotations

from collections.abc import Callable

from console.hw.backend import GpuBackend, GpuDeviceError, GpuStatic, GpuUnavailable
from console.hw.numa import NumaNodeInfo, pci_numa_node, read_numa_nodes
from console.topology.model import GpuInfo, NumaNode, Topology


def node_for_gpu(static: GpuStatic, nodes: tuple[NumaNodeInfo, ...]) -> int | None:
    """NVML's NUMA id, else the node whose CPUs best cover the GPU's CPU affinity, else sysfs."""
    if static.numa_node is not None:
        return static.numa_node
    if static.cpu_affinity and len(nodes) > 1:
        affinity = set(static.cpu_affinity)
        best = max(nodes, key=lambda node: len(affinity & set(node.cpus)))
        if affinity & set(best.cpus):
            return best.id
    if len(nodes) == 1:
        return nodes[0].id
    return pci_numa_node(static.bus_id)


def discover(
    backend: GpuBackend,
    numa_reader: Callable[[], tuple[NumaNodeInfo, ...]] = read_numa_nodes,
) -> Topology:
    """Enumerate GPUs (static facts plus the link as trained now) and NUMA nodes."""
    nodes = numa_reader()
    gpus: list[GpuInfo] = []
    status: str | None = None
    driver: str | None = None
    try:
        backend.open()
        count = backend.device_count()
        driver = backend.driver_version()
    except GpuUnavailable as exc:
        status = f"no GPUs: {exc.reason}"
        count = 0
    for index in range(count):
        gpus.append(_gpu_info(backend, index, nodes))
    if count == 0 and status is None:
        status = "no GPUs: NVML reports 0 devices"
    numa_nodes = tuple(
        NumaNode(
            node.id,
            node.cpus,
            node.memory_total_bytes,
            tuple(gpu.index for gpu in gpus if gpu.numa_node == node.id),
        )
        for node in nodes
    )
    source = backend.kind if status is None else "none"
    return Topology(source, tuple(gpus), numa_nodes, status, driver)


def _gpu_info(backend: GpuBackend, index: int, nodes: tuple[NumaNodeInfo, ...]) -> GpuInfo:
    try:
        static = backend.static_info(index)
    except GpuDeviceError as exc:
        return GpuInfo(
            index,
            f"GPU {index}",
            None,
            None,
            None,
            None,
            (),
            None,
            None,
            None,
            None,
            error=exc.reason,
        )
    gen = width = None
    try:
        reading = backend.read(index)
        gen, width = reading.pcie_gen_current, reading.pcie_width_current
    except GpuDeviceError:
        pass
    return GpuInfo(
        index=index,
        name=static.name,
        uuid=static.uuid,
        bus_id=static.bus_id,
        memory_total_bytes=static.memory_total_bytes,
        numa_node=node_for_gpu(static, nodes),
        cpu_affinity=static.cpu_affinity,
        pcie_gen_current=gen,
        pcie_gen_max=static.pcie_gen_max,
        pcie_width_current=width,
        pcie_width_max=static.pcie_width_max,
    )
