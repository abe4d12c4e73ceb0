"""The real NVML backend driven by a fake pynvml module: fields, units, failures, and the
GPU source's use of the sampled PCIe call."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from console.hw.backend import GpuDeviceError, GpuUnavailable
from console.hw.numa import NumaNodeInfo
from console.hw.nvml import NvmlBackend, throttle_names
from console.telemetry.gpu_source import SAMPLED_PCIE_EVERY, GpuSource
from console.telemetry.samples import GpuSample
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
    fake = FakePynvml([FakeDevice(power_mw=312_500, throttle_mask=0x4 | 0x40)])
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
    assert reading.throttle_reasons == ("sw_power_cap", "hw_thermal")


def test_sampled_throughput_converts_kb_to_bytes():
    fake = FakePynvml([FakeDevice(pcie_counters_supported=False, pcie_tx_kbs=4, pcie_rx_kbs=8)])
    reading = NvmlBackend(fake).read(0, sample_pcie_throughput=True)
    assert reading.pcie_tx_bytes_total is None
    assert reading.pcie_tx_sampled_bytes_s == 4096.0  # KB/s -> bytes/s
    assert reading.pcie_rx_sampled_bytes_s == 8192.0


def test_sampled_throughput_only_when_asked():
    fake = FakePynvml([FakeDevice()])
    backend = NvmlBackend(fake)
    reading = backend.read(0)
    assert reading.pcie_tx_sampled_bytes_s is None
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0


def test_sampled_throughput_skipped_while_counters_answer():
    fake = FakePynvml([FakeDevice()])
    reading = NvmlBackend(fake).read(0, sample_pcie_throughput=True)
    assert reading.pcie_tx_bytes_total == 1_000_000
    assert reading.pcie_tx_sampled_bytes_s is None
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0


def test_counter_fields_unsupported_are_not_asked_again():
    fake = FakePynvml([FakeDevice(pcie_counters_supported=False)])
    backend = NvmlBackend(fake)
    first = backend.read(0)
    second = backend.read(0)
    assert first.pcie_tx_bytes_total is None
    assert second.pcie_rx_bytes_total is None
    assert fake.calls["nvmlDeviceGetFieldValues"] == 1


def _poll_gpu_source(
    fake: FakePynvml, ticks: int, before_tick: Callable[[int], None] | None = None
) -> list[dict[int, GpuSample]]:
    """Poll a GpuSource over NVML on a synthetic one-second clock; each tick's samples by GPU.

    `before_tick(tick)` may change the fake devices before that tick's read.
    """

    async def run() -> list[dict[int, GpuSample]]:
        # A generous deadline: a loaded machine must not turn a tick into a stall.
        source = GpuSource(NvmlBackend(fake), interval_s=1.0, timeout_s=30.0)
        ticks_seen: list[dict[int, GpuSample]] = []
        try:
            for tick in range(ticks):
                if before_tick is not None:
                    before_tick(tick)
                for device in fake.devices:
                    device.pcie_tx_total += 1_000 * tick
                    device.pcie_rx_total += 3_000 * tick
                result = await source.poll(float(tick))
                ticks_seen.append({s.index: s for s in result.samples if isinstance(s, GpuSample)})
        finally:
            await source.close()
        return ticks_seen

    return asyncio.run(run())


def test_gpu_source_makes_no_sampled_call_when_counters_work():
    fake = FakePynvml([FakeDevice(), FakeDevice()])
    ticks = 2 * SAMPLED_PCIE_EVERY + 1  # three ticks on which sampling is allowed
    samples = _poll_gpu_source(fake, ticks)
    assert fake.calls["nvmlDeviceGetPcieThroughput"] == 0
    last = ticks - 1
    for index in (0, 1):
        # Rated from the counters: tick N adds 1000*N bytes sent over one second.
        assert samples[last][index].pcie_tx_bytes_s == pytest.approx(1_000 * last)
        assert samples[last][index].pcie_rx_bytes_s == pytest.approx(3_000 * last)


def test_gpu_source_samples_only_the_device_without_counters():
    fake = FakePynvml([FakeDevice(), FakeDevice(pcie_counters_supported=False)])
    ticks = 2 * SAMPLED_PCIE_EVERY + 1
    samples = _poll_gpu_source(fake, ticks)
    with_counters, without = fake.devices
    assert with_counters.calls["nvmlDeviceGetPcieThroughput"] == 0
    # TX and RX on each allowed tick (0, N, 2N); the counters were probed once.
    assert without.calls["nvmlDeviceGetPcieThroughput"] == 2 * 3
    assert without.calls["nvmlDeviceGetFieldValues"] == 1
    assert with_counters.calls["nvmlDeviceGetFieldValues"] == ticks
    # The sampled value (KB/s) is held between the ticks that sample it.
    assert all(tick[1].pcie_tx_bytes_s == 1000 * 1024.0 for tick in samples)
    assert all(tick[1].pcie_rx_bytes_s == 2000 * 1024.0 for tick in samples)


def test_gpu_source_counters_that_start_failing_fall_back_then_recover():
    fake = FakePynvml([FakeDevice()])
    device = fake.devices[0]
    every = SAMPLED_PCIE_EVERY
    fail_from, fail_until = every - 1, 2 * every + 1  # failing on ticks N-1 .. 2N

    def before_tick(tick: int) -> None:
        device.pcie_counters_supported = not fail_from <= tick <= fail_until

    samples = _poll_gpu_source(fake, 3 * every + 1, before_tick)
    # Sampled only on the allowed ticks inside the failure (N and 2N), TX and RX each.
    assert device.calls["nvmlDeviceGetPcieThroughput"] == 2 * 2
    # Re-checked on every read once they had worked, so the recovery is seen.
    assert device.calls["nvmlDeviceGetFieldValues"] == 3 * every + 1
    rates = [tick[0].pcie_tx_bytes_s for tick in samples]
    assert rates[0] is None  # one counter reading is not yet a rate
    assert rates[1] == pytest.approx(1_000)
    assert rates[fail_from] is None  # failing, and no allowed tick yet
    assert rates[every] == 1000 * 1024.0
    assert rates[fail_until] == 1000 * 1024.0  # held
    assert rates[fail_until + 1] is None  # a fresh counter baseline, not the gap's average
    assert rates[fail_until + 2] == pytest.approx(1_000 * (fail_until + 2))
    assert rates[-1] == pytest.approx(1_000 * (3 * every))


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
