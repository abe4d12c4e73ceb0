"""The real NVML backend driven by a fake pynvml module: fields, units, failures."""

from __future__ import annotations

import logging

import pytest

from console.hw.backend import GpuDeviceError, GpuUnavailable
from console.hw.numa import NumaNodeInfo
from console.hw.nvml import NvmlBackend, throttle_names
from console.topology.discover import discover
from tests.fakes.fake_pynvml import (
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    FakeDevice,
    FakePynvml,
)

TWO_NODES = (
    NumaNodeInfo(0, tuple(range(0, 16)), None),
    NumaNodeInfo(1, tuple(range(16, 32)), None),
)


def test_reading_converts_units():
    fake = FakePynvml([FakeDevice(power_mw=312_500, pcie_tx_kbs=4, throttle_mask=0x4 | 0x40)])
    backend = NvmlBackend(fake)
    reading = backend.read(0, sample_pcie_throughput=True)
    assert reading.power_w == pytest.approx(312.5)
    assert reading.power_limit_w == pytest.approx(700.0)
    assert reading.util_pct == 35.0
    assert reading.mem_used_bytes == 1024**3
    assert reading.temp_c == 40.0
    assert reading.sm_clock_mhz == 1980.0
    assert reading.mem_clock_mhz == 3201.0
    assert reading.pcie_gen_current == 5
    assert reading.pcie_width_current == 16
    assert reading.pcie_tx_bytes_total == 1_000_000
    assert reading.pcie_rx_bytes_total == 2_000_000
    assert reading.pcie_tx_bytes_s == 4096.0  # KB/s -> bytes/s
    assert reading.throttle_reasons == ("sw_power_cap", "hw_thermal")


def test_sampled_throughput_only_when_asked():
    fake = FakePynvml([FakeDevice()])
    backend = NvmlBackend(fake)
    reading = backend.read(0)
    assert reading.pcie_tx_bytes_s is None
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0


def test_counter_fields_unsupported_are_not_asked_again():
    fake = FakePynvml([FakeDevice(pcie_counters_supported=False)])
    backend = NvmlBackend(fake)
    first = backend.read(0)
    second = backend.read(0)
    assert first.pcie_tx_bytes_total is None
    assert second.pcie_rx_bytes_total is None
    assert fake.calls["nvmlDeviceGetFieldValues"] == 1


def test_unsupported_field_is_none_not_an_error():
    fake = FakePynvml([FakeDevice(failing={"nvmlDeviceGetPowerUsage": NVML_ERROR_NOT_SUPPORTED})])
    reading = NvmlBackend(fake).read(0)
    assert reading.power_w is None
    assert reading.temp_c == 40.0


def test_missing_function_noted_once(caplog: pytest.LogCaptureFixture):
    fake = FakePynvml(
        [FakeDevice(failing={"nvmlDeviceGetTemperature": NVML_ERROR_FUNCTION_NOT_FOUND})]
    )
    backend = NvmlBackend(fake)
    with caplog.at_level(logging.INFO, logger="console.hw.nvml"):
        backend.read(0)
        backend.read(0)
    notes = [r for r in caplog.records if "nvmlDeviceGetTemperature" in r.getMessage()]
    assert len(notes) == 1


def test_lost_gpu_degrades_only_that_gpu():
    fake = FakePynvml([FakeDevice(), FakeDevice(lost=True)])
    backend = NvmlBackend(fake)
    assert backend.read(0).util_pct == 35.0
    with pytest.raises(GpuDeviceError) as info:
        backend.read(1)
    assert info.value.index == 1
    assert "lost" in info.value.reason


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (NVML_ERROR_LIBRARY_NOT_FOUND, "NVML library not found"),
        (NVML_ERROR_DRIVER_NOT_LOADED, "NVIDIA driver not loaded"),
    ],
)
def test_init_failure_is_unavailable_with_reason(code: int, reason: str):
    backend = NvmlBackend(FakePynvml(init_error=code))
    with pytest.raises(GpuUnavailable) as info:
        backend.open()
    assert info.value.reason == reason


def test_topology_without_nvml_library_is_a_clear_state():
    topology = discover(
        NvmlBackend(FakePynvml(init_error=NVML_ERROR_LIBRARY_NOT_FOUND)), lambda: TWO_NODES
    )
    assert topology.gpus == ()
    assert topology.gpu_status == "no GPUs: NVML library not found"
    assert [node.id for node in topology.numa_nodes] == [0, 1]


def test_topology_numa_from_cpu_affinity():
    devices = [
        FakeDevice(affinity_words=(0xFFFF,)),
        FakeDevice(affinity_words=(0xFFFF0000,), pcie_width=8),
    ]
    topology = discover(NvmlBackend(FakePynvml(devices)), lambda: TWO_NODES)
    assert [gpu.numa_node for gpu in topology.gpus] == [0, 1]
    assert topology.gpus[1].cpu_affinity == tuple(range(16, 32))
    assert topology.gpus[1].link_downtrained
    assert topology.numa_nodes[1].gpus == (1,)
    assert topology.driver_version == "580.95.05"


def test_topology_prefers_nvml_numa_id():
    devices = [FakeDevice(affinity_words=(0xFFFF,), numa_node=1)]
    topology = discover(NvmlBackend(FakePynvml(devices)), lambda: TWO_NODES)
    assert topology.gpus[0].numa_node == 1


def test_unreadable_gpu_still_listed():
    devices = [FakeDevice(), FakeDevice(lost=True)]
    topology = discover(NvmlBackend(FakePynvml(devices)), lambda: TWO_NODES)
    assert len(topology.gpus) == 2
    assert topology.gpus[1].error is not None


def test_compute_processes():
    fake = FakePynvml([FakeDevice(processes=[(4242, 80 * 1024**3)])])
    procs = NvmlBackend(fake).compute_processes(0)
    assert [(p.pid, p.used_memory_bytes) for p in procs] == [(4242, 80 * 1024**3)]


def test_throttle_names_ignore_unknown_bits():
    assert throttle_names(0) == ()
    assert throttle_names(0x1) == ("gpu_idle",)
    assert throttle_names(0x8000) == ()


def _nvml_library_present() -> bool:
    import ctypes.util

    return ctypes.util.find_library("nvidia-ml") is not None


@pytest.mark.skipif(_nvml_library_present(), reason="this host has the NVML library")
def test_real_library_missing_here_gives_reason(cli):
    """Without the NVIDIA library, the real module gives a plain reason, not an exception."""
    with pytest.raises(GpuUnavailable, match=r"^NVML library not found$"):
        NvmlBackend().open()
    result = cli("plan", "kimi-k2.6")
    assert result.code == 2
    assert "(no GPUs: NVML library not found)" in result.err
    assert "Traceback" not in result.err
