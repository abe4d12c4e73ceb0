"""A fake `pynvml` module: scripted devices, per-function failures, lost GPUs, hangs.

It mirrors the parts of nvidia-ml-py that `console.hw.nvml` calls, with the same error type
(`NVMLError` carrying `.value`) and the same units (milliwatts, KB/s for sampled PCIe).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999

_MESSAGES = {
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML error {self.value}")


@dataclass
class FakeDevice:
    name: str = "NVIDIA H200"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    bus_id: str = "00000000:18:00.0"
    memory_total: int = 141 * 1024**3
    memory_used: int = 1024**3
    power_mw: int = 120_000
    power_limit_mw: int = 700_000
    temperature_c: int = 40
    sm_clock: int = 1980
    mem_clock: int = 3201
    util_gpu: int = 35
    util_mem: int = 20
    pcie_gen: int = 5
    pcie_gen_max: int = 5
    pcie_width: int = 16
    pcie_width_max: int = 16
    pcie_tx_total: int = 1_000_000
    pcie_rx_total: int = 2_000_000
    pcie_counters_supported: bool = True
    """Whether the PCIe byte-counter fields answer; a test may flip it between reads."""
    pcie_tx_kbs: int = 1000
    pcie_rx_kbs: int = 2000
    throttle_mask: int = 0
    affinity_words: tuple[int, ...] = (0xFFFF,)
    numa_node: int | None = None
    processes: list[tuple[int, int]] = field(default_factory=list)
    failing: dict[str, int] = field(default_factory=dict)
    """Function name -> NVML error code it raises on this device."""
    lost: bool = False
    hang_seconds: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)
    """Function name -> calls made on this device (the module's `calls` sums all devices)."""


class FakePynvml:
    """Stands in for the `pynvml` module (`NvmlBackend(nvml_module=FakePynvml(...))`)."""

    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    # nvidia-ml-py 13.615.71 pynvml.py:765-766.
    NVML_FI_DEV_PCIE_COUNT_TX_BYTES = 197
    NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 198

    def __init__(
        self,
        devices: list[FakeDevice] | None = None,
        *,
        init_error: int | None = None,
        driver: str = "580.95.05",
    ) -> None:
        self.devices = devices if devices is not None else [FakeDevice()]
        self.init_error = init_error
        self.driver = driver
        self.calls: Counter[str] = Counter()
        self.initialised = False

    # -- library ----------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDevice:
        if not 0 <= index < len(self.devices):
            raise NVMLError(2)
        return self.devices[index]

    # -- per-device -------------------------------------------------------------------------

    def _enter(self, name: str, device: FakeDevice) -> None:
        self.calls[name] += 1
        device.calls[name] += 1
        if device.hang_seconds:
            time.sleep(device.hang_seconds)
        if device.lost:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        if name in device.failing:
            raise NVMLError(device.failing[name])

    def nvmlDeviceGetName(self, device: FakeDevice) -> str:
        self._enter("nvmlDeviceGetName", device)
        return device.name

    def nvmlDeviceGetUUID(self, device: FakeDevice) -> str:
        self._enter("nvmlDeviceGetUUID", device)
        return device.uuid

    def nvmlDeviceGetPciInfo(self, device: FakeDevice) -> Any:
        self._enter("nvmlDeviceGetPciInfo", device)
        return SimpleNamespace(busId=device.bus_id.encode())

    def nvmlDeviceGetMemoryInfo(self, device: FakeDevice) -> Any:
        self._enter("nvmlDeviceGetMemoryInfo", device)
        return SimpleNamespace(
            total=device.memory_total,
            used=device.memory_used,
            free=device.memory_total - device.memory_used,
        )

    def nvmlDeviceGetEnforcedPowerLimit(self, device: FakeDevice) -> int:
        self._enter("nvmlDeviceGetEnforcedPowerLimit", device)
        return device.power_limit_mw

    def nvmlDeviceGetPowerUsage(self, device: FakeDevice) -> int:
        self._enter("nvmlDeviceGetPowerUsage", device)
        return device.power_mw

    def nvmlDeviceGetTemperature(self, device: FakeDevice, sensor: int) -> int:
        self._enter("nvmlDeviceGetTemperature", device)
        assert sensor == self.NVML_TEMPERATURE_GPU
        return device.temperature_c

    def nvmlDeviceGetClockInfo(self, device: FakeDevice, clock: int) -> int:
        self._enter("nvmlDeviceGetClockInfo", device)
        return device.sm_clock if clock == self.NVML_CLOCK_SM else device.mem_clock

    def nvmlDeviceGetUtilizationRates(self, device: FakeDevice) -> Any:
        self._enter("nvmlDeviceGetUtilizationRates", device)
        return SimpleNamespace(gpu=device.util_gpu, memory=device.util_mem)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, device: FakeDevice) -> int:
        self._enter("nvmlDeviceGetCurrPcieLinkGeneration", device)
        return device.pcie_gen

    def nvmlDeviceGetMaxPcieLinkGeneration(self, device: FakeDevice) -> int:
        self._enter("nvmlDeviceGetMaxPcieLinkGeneration", device)
        return device.pcie_gen_max

    def nvmlDeviceGetCurrPcieLinkWidth(self, device: FakeDevice) -> int:
        self._enter("nvmlDeviceGetCurrPcieLinkWidth", device)
        return device.pcie_width

    def nvmlDeviceGetMaxPcieLinkWidth(self, device: FakeDevice) -> int:
        self._enter("nvmlDeviceGetMaxPcieLinkWidth", device)
        return device.pcie_width_max

    def nvmlDeviceGetPcieThroughput(self, device: FakeDevice, counter: int) -> int:
        self._enter("nvmlDeviceGetPcieThroughput", device)
        return device.pcie_tx_kbs if counter == self.NVML_PCIE_UTIL_TX_BYTES else device.pcie_rx_kbs

    def nvmlDeviceGetFieldValues(self, device: FakeDevice, field_ids: list[int]) -> list[Any]:
        self._enter("nvmlDeviceGetFieldValues", device)
        # Each value carries its own return code (c_nvmlFieldValue_t.nvmlReturn, nvidia-ml-py
        # 13.615.71 pynvml.py:1544); the call itself raises only on its overall status (5016).
        values = []
        for field_id in field_ids:
            if field_id == self.NVML_FI_DEV_PCIE_COUNT_TX_BYTES:
                value = device.pcie_tx_total
            elif field_id == self.NVML_FI_DEV_PCIE_COUNT_RX_BYTES:
                value = device.pcie_rx_total
            else:
                raise AssertionError(f"the fake does not serve NVML field {field_id}")
            ret = 0 if device.pcie_counters_supported else NVML_ERROR_NOT_SUPPORTED
            values.append(
                SimpleNamespace(
                    fieldId=field_id, nvmlReturn=ret, value=SimpleNamespace(ullVal=value)
                )
            )
        return values

    def nvmlDeviceGetCurrentClocksEventReasons(self, device: FakeDevice) -> int:
        self._enter("nvmlDeviceGetCurrentClocksEventReasons", device)
        return device.throttle_mask

    def nvmlDeviceGetComputeRunningProcesses(self, device: FakeDevice) -> list[Any]:
        self._enter("nvmlDeviceGetComputeRunningProcesses", device)
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in device.processes]

    def nvmlDeviceGetCpuAffinity(self, device: FakeDevice, words: int) -> list[int]:
        self._enter("nvmlDeviceGetCpuAffinity", device)
        return list(device.affinity_words[:words]) + [0] * max(
            0, words - len(device.affinity_words)
        )

    def nvmlDeviceGetNumaNodeId(self, device: FakeDevice) -> int:
        self._enter("nvmlDeviceGetNumaNodeId", device)
        if device.numa_node is None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return device.numa_node
