"""Real NVML through console.hw (skipped without an NVIDIA GPU and driver)."""

from __future__ import annotations

import pytest

from console.hw.numa import read_numa_nodes
from console.hw.nvml import NvmlBackend
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
            assert reading.pcie_tx_bytes_s is not None or reading.pcie_tx_bytes_total is not None
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
