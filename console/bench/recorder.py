"""Telemetry kept with a run: the target server and the GPUs, recorded while levels run.

The recorder holds a telemetry hub (the composition root the console and the CLI use too)
and writes every poll into the run's recording (`console.telemetry.run_telemetry`).
"""

from __future__ import annotations

import httpx

from console.bench.levels import Target
from console.bench.rundir import RunDir
from console.core.auth import bearer_key
from console.core.errors import ConsoleError
from console.hw.backend import GpuBackend
from console.telemetry.hub import TelemetryHub
from console.telemetry.keys import SourceId
from console.telemetry.run_telemetry import RunTelemetryWriter

RING_CAPACITY = 16
"""The hub's store is only a staging area here: the recording is what is kept."""


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
        self.server_id = server_id
        self.hub = TelemetryHub(interval_s=interval_s, capacity=RING_CAPACITY, client=client)
        self.store = self.hub.store
        if gpu_backend is not None:
            self.hub.add_gpus(gpu_backend)
        api_key = bearer_key(target.headers)
        self.hub.track(SourceId.server(server_id), target.url, api_key=api_key)
        self.writer: RunTelemetryWriter | None = None

    @property
    def error(self) -> str | None:
        """Why the run's telemetry stopped being written, if it did."""
        return self.writer.error if self.writer is not None else None

    def _demo(self) -> bool:
        try:
            fingerprint = self.run.meta().fingerprint
        except ConsoleError:
            return False
        return bool((fingerprint or {}).get("demo"))

    async def start(self) -> None:
        self.writer = RunTelemetryWriter(
            self.run.path,
            interval_s=self.interval_s,
            note=f"server {self.server_id}",
            demo=self._demo(),
        )
        self.hub.listen(self.writer.poll)
        self.hub.start()

    async def stop(self) -> None:
        await self.hub.close()
        if self.writer is not None:
            self.hub.unlisten(self.writer.poll)
            self.writer.close()
