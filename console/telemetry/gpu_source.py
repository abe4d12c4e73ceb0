"""GPU telemetry through console.hw: one executor call per tick reads every GPU.

PCIe throughput comes from NVML's byte counters, rated here. Every Nth tick the backend may
make the sampled-throughput call (about 20 ms per device), and does so only for a device whose
counters did not answer; that value is held in between. Static facts are read once.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.hw.backend import GpuBackend, GpuDeviceError, GpuReading, GpuStatic, GpuUnavailable
from console.telemetry.blocking import BlockingCaller, Stalled
from console.telemetry.derive import counter_rate
from console.telemetry.keys import SourceId
from console.telemetry.samples import GpuSample, SourceState, SourceStatus
from console.telemetry.source import PollResult

SAMPLED_PCIE_EVERY = 4


@dataclass
class _Counters:
    t: float
    tx: int
    rx: int


class GpuSource:
    name = SourceId.GPUS

    def __init__(
        self,
        backend: GpuBackend,
        *,
        interval_s: float = 1.0,
        numa_nodes: dict[int, int | None] | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.backend = backend
        self.interval_s = interval_s
        self.numa_nodes = numa_nodes or {}
        self.caller = BlockingCaller("nvml", timeout_s or interval_s * 0.8)
        self._static: dict[int, GpuStatic] = {}
        self._count: int | None = None
        self._counters: dict[int, _Counters] = {}
        self._sampled: dict[int, tuple[float | None, float | None]] = {}
        self._ticks = 0
        self._last_ok: dict[SourceId, float] = {}

    def _read_all(self, sample_pcie: bool) -> tuple[int, list[GpuReading | GpuDeviceError]]:
        """Runs on the executor: every GPU's reading, or the error of the one that failed."""
        self.backend.open()
        if self._count is None:
            self._count = self.backend.device_count()
        results: list[GpuReading | GpuDeviceError] = []
        for index in range(self._count):
            try:
                if index not in self._static:
                    self._static[index] = self.backend.static_info(index)
                results.append(self.backend.read(index, sample_pcie_throughput=sample_pcie))
            except GpuDeviceError as exc:
                results.append(exc)
        return self._count, results

    async def poll(self, now: float) -> PollResult:
        sample_pcie = self._ticks % SAMPLED_PCIE_EVERY == 0
        self._ticks += 1
        try:
            _, readings = await self.caller.call(lambda: self._read_all(sample_pcie))
        except Stalled as exc:
            return PollResult(
                statuses=[
                    SourceStatus(
                        name=self.name,
                        state=SourceState.STALLED,
                        reason=f"NVML call still running ({exc.seconds:.1f} s)",
                        last_ok_mono=self._last_ok.get(self.name),
                    )
                ]
            )
        except GpuUnavailable as exc:
            return PollResult(
                statuses=[
                    SourceStatus(
                        name=self.name,
                        state=SourceState.UNAVAILABLE,
                        reason=f"no GPU telemetry: {exc.reason}",
                    )
                ]
            )
        result = PollResult()
        for item in readings:
            gpu = SourceId.gpu(item.index)
            if isinstance(item, GpuDeviceError):
                result.statuses.append(
                    SourceStatus(
                        name=gpu,
                        state=SourceState.UNAVAILABLE,
                        reason=item.reason,
                        last_ok_mono=self._last_ok.get(gpu),
                    )
                )
                continue
            result.samples.append(self._sample(item, now))
            self._last_ok[gpu] = now
            result.statuses.append(SourceStatus(name=gpu, state=SourceState.OK, last_ok_mono=now))
        self._last_ok[self.name] = now
        failing = [str(s.name) for s in result.statuses if s.state is not SourceState.OK]
        result.statuses.append(
            SourceStatus(
                name=self.name,
                state=SourceState.DEGRADED if failing else SourceState.OK,
                reason=f"{', '.join(failing)} unreadable" if failing else None,
                last_ok_mono=now,
            )
        )
        return result

    def _sample(self, reading: GpuReading, now: float) -> GpuSample:
        index = reading.index
        static = self._static.get(index)
        tx_rate = rx_rate = None
        if reading.pcie_tx_bytes_total is not None and reading.pcie_rx_bytes_total is not None:
            previous = self._counters.get(index)
            if previous is not None:
                seconds = now - previous.t
                tx_rate = counter_rate(previous.tx, reading.pcie_tx_bytes_total, seconds)
                rx_rate = counter_rate(previous.rx, reading.pcie_rx_bytes_total, seconds)
            self._counters[index] = _Counters(
                now, reading.pcie_tx_bytes_total, reading.pcie_rx_bytes_total
            )
            self._sampled.pop(index, None)
        else:
            # A baseline from before the counters stopped would average over the gap.
            self._counters.pop(index, None)
            tx, rx = reading.pcie_tx_sampled_bytes_s, reading.pcie_rx_sampled_bytes_s
            if tx is not None or rx is not None:
                self._sampled[index] = (tx, rx)
            tx_rate, rx_rate = self._sampled.get(index, (None, None))
        return GpuSample(
            t_mono=now,
            source=SourceId.gpu(index),
            index=index,
            name=static.name if static else None,
            util_pct=reading.util_pct,
            mem_util_pct=reading.mem_util_pct,
            mem_used_bytes=reading.mem_used_bytes,
            mem_total_bytes=reading.mem_total_bytes,
            power_w=reading.power_w,
            power_limit_w=reading.power_limit_w,
            temp_c=reading.temp_c,
            sm_clock_mhz=reading.sm_clock_mhz,
            mem_clock_mhz=reading.mem_clock_mhz,
            pcie_tx_bytes_s=tx_rate,
            pcie_rx_bytes_s=rx_rate,
            pcie_gen_current=reading.pcie_gen_current,
            pcie_gen_max=static.pcie_gen_max if static else None,
            pcie_width_current=reading.pcie_width_current,
            pcie_width_max=static.pcie_width_max if static else None,
            throttle_reasons=reading.throttle_reasons,
            numa_node=self.numa_nodes.get(index, static.numa_node if static else None),
        )

    async def close(self) -> None:
        self.caller.close()
