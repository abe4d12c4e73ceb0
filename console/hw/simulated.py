"""The simulated host of demo mode: 8x RTX PRO 6000 Blackwell, PCIe Gen5, two NUMA nodes.

Static facts mirror the reference box. Readings start from an idle baseline and add the
load that simulator processes publish (see `simload`), so nothing above `console.hw` can tell
a demo GPU from a real one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from console.hw.backend import GpuDeviceError, GpuProcess, GpuReading, GpuStatic
from console.hw.host import HostReading
from console.hw.numa import NumaNodeInfo
from console.hw.simload import SimPublication, read_publications, running

GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
GPU_MEMORY_BYTES = 97_887 * 1024 * 1024
GPU_POWER_LIMIT_W = 600.0
IDLE_MEMORY_BYTES = 512 * 1024 * 1024
IDLE_POWER_W = 24.0
IDLE_TEMP_C = 31.0
CPUS_PER_NODE = 32
NODE_MEMORY_BYTES = 256 * 1024**3


@dataclass(frozen=True)
class SimulatedHostSpec:
    """Shape of the simulated host; defaults are the reference box."""

    gpu_count: int = 8
    gpus_per_node: int = 4
    downtrained_gpus: tuple[int, ...] = (6,)
    """GPUs whose link trained at x8 instead of x16, so down-training shows in the demo."""


class SimulatedGpuBackend:
    """GpuBackend over the simulated host; reads simulator publications from `load_dir`."""

    kind = "simulated"

    def __init__(self, load_dir: Path | None, spec: SimulatedHostSpec | None = None) -> None:
        self.load_dir = load_dir
        self.spec = spec or SimulatedHostSpec()
        self.failing_gpus: set[int] = set()
        """GPUs whose reads fail (tests use it to degrade one GPU)."""
        self._publications: list[SimPublication] = []
        self._publications_read_at = 0.0

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def device_count(self) -> int:
        return self.spec.gpu_count

    def driver_version(self) -> str | None:
        return "580.95.05 (simulated)"

    def numa_nodes(self) -> tuple[NumaNodeInfo, ...]:
        node_count = max(1, -(-self.spec.gpu_count // self.spec.gpus_per_node))
        return tuple(
            NumaNodeInfo(
                node,
                tuple(range(node * CPUS_PER_NODE, (node + 1) * CPUS_PER_NODE)),
                NODE_MEMORY_BYTES,
            )
            for node in range(node_count)
        )

    def node_of(self, index: int) -> int:
        return index // self.spec.gpus_per_node

    def static_info(self, index: int) -> GpuStatic:
        self._check(index)
        node = self.node_of(index)
        return GpuStatic(
            index=index,
            name=GPU_NAME,
            uuid=f"GPU-5111{index:04d}-d00d-4000-8000-00000000000{index % 10}",
            bus_id=f"00000000:{0x18 + 0x10 * index:02X}:00.0",
            memory_total_bytes=GPU_MEMORY_BYTES,
            power_limit_w=GPU_POWER_LIMIT_W,
            numa_node=node,
            cpu_affinity=tuple(range(node * CPUS_PER_NODE, (node + 1) * CPUS_PER_NODE)),
            pcie_gen_max=5,
            pcie_width_max=16,
        )

    def read(self, index: int, *, sample_pcie_throughput: bool = False) -> GpuReading:
        self._check(index)
        if index in self.failing_gpus:
            raise GpuDeviceError(index, "Unknown Error (simulated failure)")
        util = 0.0
        mem_used = IDLE_MEMORY_BYTES
        power = IDLE_POWER_W
        tx_total = rx_total = 0
        for publication in self._fresh_publications():
            load = publication.gpus.get(index)
            if load is None:
                continue
            util = min(100.0, util + load.util_pct)
            mem_used += load.mem_used_bytes
            power += load.power_w
            tx_total += load.pcie_tx_bytes_total
            rx_total += load.pcie_rx_bytes_total
        busy = util > 0.5 or mem_used > IDLE_MEMORY_BYTES
        power = min(power, GPU_POWER_LIMIT_W)
        return GpuReading(
            index=index,
            util_pct=util,
            mem_util_pct=util * 0.6,
            mem_used_bytes=min(mem_used, GPU_MEMORY_BYTES),
            mem_total_bytes=GPU_MEMORY_BYTES,
            power_w=round(power, 1),
            power_limit_w=GPU_POWER_LIMIT_W,
            temp_c=round(IDLE_TEMP_C + 0.07 * (power - IDLE_POWER_W), 1),
            sm_clock_mhz=2602.0 if util > 0.5 else (1200.0 if busy else 180.0),
            mem_clock_mhz=14001.0 if busy else 405.0,
            pcie_gen_current=5 if busy else 1,
            pcie_width_current=8 if index in self.spec.downtrained_gpus else 16,
            pcie_tx_bytes_total=tx_total,
            pcie_rx_bytes_total=rx_total,
            pcie_tx_sampled_bytes_s=None,
            pcie_rx_sampled_bytes_s=None,
            throttle_reasons=("gpu_idle",) if util <= 0.5 else (),
        )

    def compute_processes(self, index: int) -> tuple[GpuProcess, ...]:
        """Processes on a GPU now (read afresh: launch preflight and the release check after a
        stop depend on it). As NVML on a real host, the process is the scheduler that holds
        the GPU's context, not the server's leader (sglang 0.5.23
        srt/managers/scheduler.py:6362), listed while it lives."""
        self._check(index)
        publications = read_publications(self.load_dir) if self.load_dir else []
        found = []
        for publication in publications:
            if index not in publication.gpus:
                continue
            owner, ticks = publication.gpu_owner(index)
            if running(owner, ticks):
                found.append(
                    GpuProcess(
                        gpu_index=index,
                        pid=owner,
                        used_memory_bytes=publication.gpus[index].mem_used_bytes,
                    )
                )
        return tuple(found)

    def _check(self, index: int) -> None:
        if not 0 <= index < self.spec.gpu_count:
            raise GpuDeviceError(index, "Invalid Argument (no such simulated GPU)")

    def _fresh_publications(self) -> list[SimPublication]:
        """Publications of live simulators (read at most every 0.2 s)."""
        if self.load_dir is None:
            return []
        now = time.monotonic()
        # One directory scan serves all GPUs of a tick.
        if now - self._publications_read_at > 0.2:
            self._publications = read_publications(self.load_dir)
            self._publications_read_at = now
        return self._publications


class SimulatedHostReader:
    """Host CPU of the simulated host: a quiet baseline plus one spinning scheduler CPU per
    GPU of every simulated server (SGLang's schedulers busy-poll), on the NUMA node the
    scheduler is bound to (its GPU's node when unbound)."""

    def __init__(self, gpus: SimulatedGpuBackend) -> None:
        self.gpus = gpus

    def numa_nodes(self) -> tuple[NumaNodeInfo, ...]:
        return self.gpus.numa_nodes()

    def read(self) -> HostReading:
        nodes = self.numa_nodes()
        cpu_count = sum(len(node.cpus) for node in nodes)
        per_cpu = [2.0] * cpu_count
        for publication in self.gpus._fresh_publications():
            bound = {p.gpu: p.numa_node for p in publication.processes if p.gpu is not None}
            for gpu, load in publication.gpus.items():
                node = bound.get(gpu)
                if node is None:
                    node = self.gpus.node_of(gpu)
                cpu = node * CPUS_PER_NODE + gpu % self.gpus.spec.gpus_per_node
                if cpu < cpu_count:
                    per_cpu[cpu] = min(100.0, per_cpu[cpu] + 30.0 + 0.65 * load.util_pct)
        used = int(0.08 * NODE_MEMORY_BYTES * len(nodes))
        return HostReading(tuple(per_cpu), used, NODE_MEMORY_BYTES * len(nodes), (1.0, 1.0, 1.0))

    def process_cpus(self, pid: int) -> set[int] | None:
        """The CPUs one process of a simulated server may run on: a scheduler bound to a
        node gets that node's CPUs; the leader, the detokenizer, the DP controller and an
        unbound scheduler get every CPU, as on a real host where SGLang binds only its
        schedulers (sglang 0.5.23 srt/entrypoints/engine.py:956-960, srt/utils/numa_utils.py:28-68).
        None for a process no simulated server started (the same pid and start time)."""
        nodes = self.numa_nodes()
        for publication in self.gpus._fresh_publications():
            process = publication.process(pid)
            if process is not None and not process.running():
                continue
            if process is None and not (
                publication.pid == pid and running(pid, publication.start_ticks)
            ):
                continue
            if process is not None and process.numa_node is not None:
                return {cpu for node in nodes if node.id == process.numa_node for cpu in node.cpus}
            return {cpu for node in nodes for cpu in node.cpus}
        return None
