"""Real NVML through console.hw (skipped without an NVIDIA GPU and driver)."""

from __future__ import annotations

import asyncio
import importlib
from collections import Counter
from typing import Any

import pytest

from console.hw.numa import read_numa_nodes
from console.hw.nvml import FIELD_PCIE_RX_BYTES, FIELD_PCIE_TX_BYTES, NvmlBackend
from console.telemetry.keys import SourceId
from console.topology.discover import discover

pytestmark = pytest.mark.gpu


def test_every_field_reads_on_a_real_gpu():
    backend = NvmlBackend()
    backend.open()
    try:
        count = backend.device_count()
        assert count >= 1
        for index in range(count):
            static = backend.static_info(index)
            assert static.name
            assert static.memory_total_bytes
            assert static.memory_total_bytes > 0
            assert static.pcie_gen_max
            assert static.pcie_width_max
            reading = backend.read(index, sample_pcie_throughput=True)
            assert reading.mem_used_bytes is not None
            assert reading.mem_total_bytes == static.memory_total_bytes
            assert reading.util_pct is not None
            assert 0 <= reading.util_pct <= 100
            assert reading.power_w is not None
            assert reading.power_w > 0
            assert reading.temp_c is not None
            assert 0 < reading.temp_c < 120
            assert reading.sm_clock_mhz is not None
            assert reading.pcie_gen_current
            assert reading.pcie_width_current
            assert (
                reading.pcie_tx_sampled_bytes_s is not None
                or reading.pcie_tx_bytes_total is not None
            )
            assert reading.throttle_reasons is not None
            backend.compute_processes(index)
    finally:
        backend.close()


def test_real_topology():
    topology = discover(NvmlBackend(), read_numa_nodes)
    assert topology.gpu_status is None
    assert topology.source == "nvml"
    assert topology.gpus
    assert all(gpu.numa_node is not None for gpu in topology.gpus)
    assert topology.driver_version


def test_gpu_source_reads_every_field_through_console_hw():
    import asyncio

    from console.telemetry.gpu_source import GpuSource
    from console.telemetry.poller import Poller
    from console.telemetry.samples import GpuSample, SourceState
    from console.telemetry.store import TimeSeriesStore

    async def run() -> TimeSeriesStore:
        store = TimeSeriesStore(10)
        poller = Poller(store)
        source = GpuSource(NvmlBackend(), interval_s=0.5)
        poller.add(source)
        for _ in range(3):
            await poller.poll_once(source)
            await asyncio.sleep(0.5)
        await poller.stop()
        return store

    store = asyncio.run(run())
    assert store.statuses()[SourceId.GPUS].state is SourceState.OK
    samples = [s for s in store.latest_all().values() if isinstance(s, GpuSample)]
    assert samples
    for sample in samples:
        for field in (
            "util_pct",
            "mem_used_bytes",
            "mem_total_bytes",
            "power_w",
            "temp_c",
            "sm_clock_mhz",
            "mem_clock_mhz",
            "pcie_tx_bytes_s",
            "pcie_rx_bytes_s",
            "pcie_gen_current",
            "pcie_gen_max",
            "pcie_width_current",
            "pcie_width_max",
            "numa_node",
        ):
            assert getattr(sample, field) is not None, field
        assert sample.throttle_reasons is not None


class _CountingNvml:
    """The real pynvml module, with a count of the calls made through it."""

    def __init__(self) -> None:
        self.module = importlib.import_module("pynvml")
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.module, name)
        if not name.startswith("nvml") or not callable(value):
            return value

        def counted(*args: Any) -> Any:
            self.calls[name] += 1
            return value(*args)

        return counted


def _counters_answer(nvml: Any, index: int) -> bool:
    """Whether this GPU's PCIe byte-counter fields answer, asked of NVML directly."""
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, [FIELD_PCIE_TX_BYTES, FIELD_PCIE_RX_BYTES])
    except nvml.NVMLError:
        return False
    return all(value.nvmlReturn == 0 for value in values)


def test_sampled_pcie_call_only_for_gpus_without_byte_counters():
    """The ~20 ms nvmlDeviceGetPcieThroughput is made only where the byte counters fail."""
    from console.telemetry.gpu_source import SAMPLED_PCIE_EVERY, GpuSource
    from console.telemetry.samples import GpuSample

    nvml = _CountingNvml()
    ticks = 2 * SAMPLED_PCIE_EVERY + 1  # three ticks on which sampling is allowed

    async def run() -> dict[int, GpuSample]:
        source = GpuSource(NvmlBackend(nvml), interval_s=1.0, timeout_s=30.0)
        latest: dict[int, GpuSample] = {}
        try:
            for tick in range(ticks):
                result = await source.poll(float(tick))
                latest.update({s.index: s for s in result.samples if isinstance(s, GpuSample)})
        finally:
            await source.close()
        return latest

    latest = asyncio.run(run())
    nvml.module.nvmlInit()
    try:
        without = [i for i in latest if not _counters_answer(nvml.module, i)]
    finally:
        nvml.module.nvmlShutdown()
    assert latest
    # TX and RX once per allowed tick, and only for the GPUs whose counters do not answer.
    assert nvml.calls["nvmlDeviceGetPcieThroughput"] <= 2 * 3 * len(without)
    if without:
        assert nvml.calls["nvmlDeviceGetPcieThroughput"] > 0
    for sample in latest.values():
        assert sample.pcie_tx_bytes_s is not None
        assert sample.pcie_rx_bytes_s is not None
