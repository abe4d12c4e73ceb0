"""What every GPU backend provides: static facts, readings and compute processes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class GpuUnavailable(Exception):
    """No GPU telemetry at all on this host (library missing, driver not loaded...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GpuDeviceError(Exception):
    """One GPU cannot be read right now; the others still can."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"GPU {index}: {reason}")
        self.index = index
        self.reason = reason


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuStatic:
    """Facts that do not change while the host runs (read once, cached)."""

    index: int
    name: str
    uuid: str | None
    bus_id: str | None
    memory_total_bytes: int | None
    power_limit_w: float | None
    numa_node: int | None
    cpu_affinity: tuple[int, ...]
    pcie_gen_max: int | None
    pcie_width_max: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuReading:
    """One reading of a GPU; `None` wherever the device or driver cannot say."""

    index: int
    util_pct: float | None
    mem_util_pct: float | None
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    power_w: float | None
    power_limit_w: float | None
    temp_c: float | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    pcie_gen_current: int | None
    pcie_width_current: int | None
    pcie_tx_bytes_total: int | None
    """Cumulative PCIe bytes sent, when the driver exposes the counter (rate it)."""
    pcie_rx_bytes_total: int | None
    pcie_tx_sampled_bytes_s: float | None
    """NVML's sampled PCIe throughput (the ~20 ms call), when read on this tick; not a rate
    of the byte counters above, which the GPU source computes itself."""
    pcie_rx_sampled_bytes_s: float | None
    throttle_reasons: tuple[str, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuProcess:
    """A compute process holding memory on a GPU."""

    gpu_index: int
    pid: int
    used_memory_bytes: int | None


class GpuBackend(Protocol):
    """A source of GPU facts; every call may block and is run off the UI loop."""

    kind: str

    def open(self) -> None:
        """Initialise; raises GpuUnavailable with the reason when there is no GPU access."""

    def device_count(self) -> int: ...

    def static_info(self, index: int) -> GpuStatic: ...

    def read(self, index: int, *, sample_pcie_throughput: bool = False) -> GpuReading:
        """Read one GPU; raises GpuDeviceError when only this GPU fails."""

    def compute_processes(self, index: int) -> tuple[GpuProcess, ...]: ...

    def driver_version(self) -> str | None: ...

    def close(self) -> None: ...
