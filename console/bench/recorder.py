"""Telemetry kept with a run: the target server and the GPUs, sampled while levels run."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx

from console.bench.levels import Target
from console.bench.rundir import RunDir, RunWriteError
from console.core.auth import bearer_key
from console.hw.backend import GpuBackend
from console.telemetry.gpu_source import GpuSource
from console.telemetry.poller import Poller
from console.telemetry.samples import GpuSample, ServerSample
from console.telemetry.sglang_source import SglangSource
from console.telemetry.store import TimeSeriesStore


class TelemetryRecorder:
    def __init__(
        self,
        run: RunDir,
        gpu_backend: GpuBackend | None,
        target: Target,
        client: httpx.AsyncClient,
        *,
        interval_s: float,
        server_id: str,
    ) -> None:
        self.run = run
        self.interval_s = interval_s
        self.store = TimeSeriesStore(16)
        self.poller = Poller(self.store)
        if gpu_backend is not None:
            self.poller.add(GpuSource(gpu_backend, interval_s=interval_s))
        api_key = bearer_key(target.headers)
        self.poller.add(
            SglangSource(server_id, target.url, client, interval_s=interval_s, api_key=api_key)
        )
        self._task: asyncio.Task[None] | None = None
        self._written: dict[str, float] = {}

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        offset = time.time() - time.monotonic()
        while True:
            await self.poller.poll_all_once()
            for source, sample in self.store.latest_all().items():
                if self._written.get(source) == sample.t_mono:
                    continue
                self._written[source] = sample.t_mono
                row = _row(sample, offset)
                if row is not None:
                    try:
                        self.run.append("telemetry.jsonl", row)
                    except RunWriteError:
                        return
            await asyncio.sleep(self.interval_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for source in list(self.poller.sources.values()):
            await source.close()


def _row(sample: object, offset: float) -> dict[str, object] | None:
    if isinstance(sample, GpuSample):
        return {
            "kind": "gpu",
            "t_wall": sample.t_mono + offset,
            "index": sample.index,
            "util_pct": sample.util_pct,
            "power_w": sample.power_w,
            "mem_used_bytes": sample.mem_used_bytes,
            "pcie_rx_bytes_s": sample.pcie_rx_bytes_s,
            "pcie_tx_bytes_s": sample.pcie_tx_bytes_s,
            "temp_c": sample.temp_c,
        }
    if isinstance(sample, ServerSample):
        return {
            "kind": "server",
            "t_wall": sample.t_mono + offset,
            "server": sample.server_id,
            "tok_s": sample.decode_tok_s,
            "accept_length": sample.accept_length,
            "running": sample.running,
            "queued": sample.queued,
            "token_usage": sample.token_usage,
            "ttft_p50_s": sample.ttft_p50_s,
            "ttft_p99_s": sample.ttft_p99_s,
            "itl_p50_s": sample.itl_p50_s,
            "itl_p99_s": sample.itl_p99_s,
        }
    return None
