"""The real GPU backend over NVML (`pynvml`, from the nvidia-ml-py distribution).

NVML is initialised lazily on `open()`. A missing library or driver becomes GpuUnavailable
with a reason; a field a device does not support becomes `None`; a function the driver lacks
is noted once. All calls block and belong on a dedicated executor, never the UI loop.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from console.hw.backend import GpuDeviceError, GpuProcess, GpuReading, GpuStatic, GpuUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

# NVML error codes that say "this device or field cannot answer", not "NVML is broken".
_CODE_NOT_SUPPORTED = 3
_CODE_NO_PERMISSION = 4
_CODE_NOT_FOUND = 6
_CODE_FUNCTION_NOT_FOUND = 13
_CODE_GPU_IS_LOST = 15
_CODE_LIBRARY_NOT_FOUND = 12
_CODE_DRIVER_NOT_LOADED = 9

# NVML_FI_DEV_PCIE_COUNT_TX_BYTES / _RX_BYTES: cumulative PCIe byte counters, read with
# nvmlDeviceGetFieldValues (nvidia-ml-py 13.615.71 pynvml.py:765-766, 5004).
FIELD_PCIE_TX_BYTES = 197
FIELD_PCIE_RX_BYTES = 198

_THROTTLE_NAMES = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal"),
    (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"),
    (0x100, "display_clocks"),
)


def throttle_names(mask: int) -> tuple[str, ...]:
    """Decode NVML's clock-event bitmask into names; idle alone is not a throttle."""
    return tuple(name for bit, name in _THROTTLE_NAMES if mask & bit)


class NvmlBackend:
    """GpuBackend over NVML; `nvml_module` lets tests pass a fake module."""

    kind = "nvml"

    def __init__(self, nvml_module: ModuleType | Any | None = None) -> None:
        self._nvml: Any = nvml_module
        self._lock = threading.Lock()
        self._opened = False
        self._handles: dict[int, Any] = {}
        self._static: dict[int, GpuStatic] = {}
        self._missing_functions: set[str] = set()
        # Per device: True once its PCIe byte counters have answered, False when the first
        # probe failed (never asked again), absent until probed.
        self._counter_fields_supported: dict[int, bool] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        with self._lock:
            if self._opened:
                return
            if self._nvml is None:
                try:
                    self._nvml = importlib.import_module("pynvml")
                except ImportError:
                    raise GpuUnavailable(
                        "nvidia-ml-py is not installed (it provides the pynvml module)"
                    ) from None
            try:
                self._nvml.nvmlInit()
            except self._nvml.NVMLError as exc:
                raise GpuUnavailable(_init_reason(exc)) from None
            except OSError as exc:
                raise GpuUnavailable(f"NVML could not be loaded: {exc}") from None
            self._opened = True

    def close(self) -> None:
        with self._lock:
            if not self._opened:
                return
            self._opened = False
            self._handles.clear()
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass

    # -- queries -----------------------------------------------------------------------------

    def device_count(self) -> int:
        self._require_open()
        try:
            return int(self._nvml.nvmlDeviceGetCount())
        except self._nvml.NVMLError as exc:
            raise GpuUnavailable(f"NVML cannot count devices: {exc}") from None

    def driver_version(self) -> str | None:
        self._require_open()
        return self._optional("nvmlSystemGetDriverVersion", lambda f: _text(f()))

    def static_info(self, index: int) -> GpuStatic:
        cached = self._static.get(index)
        if cached is not None:
            return cached
        handle = self._handle(index)
        try:
            info = self._read_static(index, handle)
        except self._nvml.NVMLError as exc:
            raise GpuDeviceError(index, str(exc)) from None
        self._static[index] = info
        return info

    def _read_static(self, index: int, handle: Any) -> GpuStatic:
        name = self._optional("nvmlDeviceGetName", lambda f: _text(f(handle))) or f"GPU {index}"
        uuid = self._optional("nvmlDeviceGetUUID", lambda f: _text(f(handle)))
        bus_id = self._optional("nvmlDeviceGetPciInfo", lambda f: _text(f(handle).busId))
        memory_total = self._optional("nvmlDeviceGetMemoryInfo", lambda f: int(f(handle).total))
        power_limit = self._optional(
            "nvmlDeviceGetEnforcedPowerLimit", lambda f: float(f(handle)) / 1000.0
        )
        affinity = self._cpu_affinity(handle)
        numa_node = self._optional("nvmlDeviceGetNumaNodeId", lambda f: int(f(handle)))
        if numa_node is not None and numa_node < 0:
            numa_node = None
        gen_max = self._optional("nvmlDeviceGetMaxPcieLinkGeneration", lambda f: int(f(handle)))
        width_max = self._optional("nvmlDeviceGetMaxPcieLinkWidth", lambda f: int(f(handle)))
        return GpuStatic(
            index=index,
            name=name,
            uuid=uuid,
            bus_id=bus_id,
            memory_total_bytes=memory_total,
            power_limit_w=power_limit,
            numa_node=numa_node,
            cpu_affinity=affinity,
            pcie_gen_max=gen_max,
            pcie_width_max=width_max,
        )

    def read(self, index: int, *, sample_pcie_throughput: bool = False) -> GpuReading:
        """Read one GPU. `sample_pcie_throughput` allows the sampled PCIe call on this read; it
        is made only when the device's byte counters do not answer."""
        handle = self._handle(index)
        try:
            return self._read(index, handle, sample_pcie_throughput)
        except self._nvml.NVMLError as exc:
            raise GpuDeviceError(index, str(exc)) from None

    def _read(self, index: int, handle: Any, sample_pcie_throughput: bool) -> GpuReading:
        nvml = self._nvml
        util = self._optional("nvmlDeviceGetUtilizationRates", lambda f: f(handle))
        memory = self._optional("nvmlDeviceGetMemoryInfo", lambda f: f(handle))
        power = self._optional("nvmlDeviceGetPowerUsage", lambda f: float(f(handle)) / 1000.0)
        power_limit = self._optional(
            "nvmlDeviceGetEnforcedPowerLimit", lambda f: float(f(handle)) / 1000.0
        )
        temp = self._optional(
            "nvmlDeviceGetTemperature", lambda f: float(f(handle, nvml.NVML_TEMPERATURE_GPU))
        )
        sm_clock = self._optional(
            "nvmlDeviceGetClockInfo", lambda f: float(f(handle, nvml.NVML_CLOCK_SM))
        )
        mem_clock = self._optional(
            "nvmlDeviceGetClockInfo", lambda f: float(f(handle, nvml.NVML_CLOCK_MEM))
        )
        gen = self._optional("nvmlDeviceGetCurrPcieLinkGeneration", lambda f: int(f(handle)))
        width = self._optional("nvmlDeviceGetCurrPcieLinkWidth", lambda f: int(f(handle)))
        tx_total, rx_total = self._pcie_counters(index, handle)
        tx_rate = rx_rate = None
        if sample_pcie_throughput and (tx_total is None or rx_total is None):
            # Each call samples for about 20 ms, so it is made only for a device whose byte
            # counters did not answer on this read; callers ask only every Nth tick.
            tx_rate = self._optional(
                "nvmlDeviceGetPcieThroughput",
                lambda f: float(f(handle, nvml.NVML_PCIE_UTIL_TX_BYTES)) * 1024.0,
            )
            rx_rate = self._optional(
                "nvmlDeviceGetPcieThroughput",
                lambda f: float(f(handle, nvml.NVML_PCIE_UTIL_RX_BYTES)) * 1024.0,
            )
        reasons = self._throttle(handle)
        return GpuReading(
            index=index,
            util_pct=None if util is None else float(util.gpu),
            mem_util_pct=None if util is None else float(util.memory),
            mem_used_bytes=None if memory is None else int(memory.used),
            mem_total_bytes=None if memory is None else int(memory.total),
            power_w=power,
            power_limit_w=power_limit,
            temp_c=temp,
            sm_clock_mhz=sm_clock,
            mem_clock_mhz=mem_clock,
            pcie_gen_current=gen,
            pcie_width_current=width,
            pcie_tx_bytes_total=tx_total,
            pcie_rx_bytes_total=rx_total,
            pcie_tx_sampled_bytes_s=tx_rate,
            pcie_rx_sampled_bytes_s=rx_rate,
            throttle_reasons=reasons,
        )

    def compute_processes(self, index: int) -> tuple[GpuProcess, ...]:
        handle = self._handle(index)
        procs = self._optional("nvmlDeviceGetComputeRunningProcesses", lambda f: f(handle))
        if procs is None:
            return ()
        result = []
        for proc in procs:
            used = getattr(proc, "usedGpuMemory", None)
            result.append(
                GpuProcess(
                    gpu_index=index,
                    pid=int(proc.pid),
                    used_memory_bytes=None if used is None else int(used),
                )
            )
        return tuple(result)

    # -- helpers -----------------------------------------------------------------------------

    def _require_open(self) -> None:
        if not self._opened:
            self.open()

    def _handle(self, index: int) -> Any:
        self._require_open()
        handle = self._handles.get(index)
        if handle is None:
            try:
                handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
            except self._nvml.NVMLError as exc:
                raise GpuDeviceError(index, str(exc)) from None
            self._handles[index] = handle
        return handle

    def _optional(self, function_name: str, call: Callable[[Any], T]) -> T | None:
        """Call an NVML function; unsupported -> None, lost GPU -> GpuDeviceError."""
        function = getattr(self._nvml, function_name, None)
        if function is None:
            self._note_missing(function_name)
            return None
        try:
            return call(function)
        except self._nvml.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == _CODE_FUNCTION_NOT_FOUND:
                self._note_missing(function_name)
                return None
            if code == _CODE_GPU_IS_LOST:
                raise
            return None

    def _note_missing(self, function_name: str) -> None:
        if function_name not in self._missing_functions:
            self._missing_functions.add(function_name)
            log.info("NVML function %s is not available with this driver", function_name)

    def _cpu_affinity(self, handle: Any) -> tuple[int, ...]:
        cpu_count = os.cpu_count() or 1
        words = (cpu_count + 63) // 64
        mask = self._optional("nvmlDeviceGetCpuAffinity", lambda f: list(f(handle, words)))
        if not mask:
            return ()
        cpus = []
        for word_index, word in enumerate(mask):
            value = int(word)
            for bit in range(64):
                if value >> bit & 1:
                    cpus.append(word_index * 64 + bit)
        return tuple(cpus)

    def _pcie_counters(self, index: int, handle: Any) -> tuple[int | None, int | None]:
        """The cumulative PCIe byte counters, or (None, None) when they do not answer.

        Support is decided on a device's first read: a device whose first probe fails is not
        asked again. A device whose counters have worked is asked on every read, so a failing
        read falls back to the sampled call and a later good read ends the fallback.
        """
        supported = self._counter_fields_supported.get(index)
        if supported is False:
            return None, None
        values = self._optional(
            "nvmlDeviceGetFieldValues",
            lambda f: f(handle, [FIELD_PCIE_TX_BYTES, FIELD_PCIE_RX_BYTES]),
        )
        if values is None or len(values) != 2 or any(v.nvmlReturn != 0 for v in values):
            if supported is None:
                self._counter_fields_supported[index] = False
            return None, None
        self._counter_fields_supported[index] = True
        return int(values[0].value.ullVal), int(values[1].value.ullVal)

    def _throttle(self, handle: Any) -> tuple[str, ...] | None:
        for name in (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ):
            if getattr(self._nvml, name, None) is None:
                continue
            mask = self._optional(name, lambda f: int(f(handle)))
            if mask is not None:
                return throttle_names(mask)
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _init_reason(exc: Any) -> str:
    code = getattr(exc, "value", None)
    if code == _CODE_LIBRARY_NOT_FOUND:
        return "NVML library not found"
    if code == _CODE_DRIVER_NOT_LOADED:
        return "NVIDIA driver not loaded"
    if code == _CODE_NO_PERMISSION:
        return "no permission to use NVML"
    return f"NVML init failed: {exc}"
