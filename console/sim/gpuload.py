"""Publish the simulated GPU load of this server for demo mode's simulated host."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from console.hw.procs import process_info
from console.hw.simload import SimGpuLoad, SimProcess, SimPublication, publish, withdraw
from console.sim.catalog import ModelEntry

GPU_MEMORY_BYTES = 97_887 * 1024 * 1024
IDLE_POWER_W = 24.0
POWER_LIMIT_W = 600.0
RESIDENT_POWER_W = 40.0


def visible_gpus(environ: dict[str, str] | os._Environ[str], count: int) -> list[int]:
    """Physical GPU ids from CUDA_VISIBLE_DEVICES (as a real server would see them)."""
    text = environ.get("CUDA_VISIBLE_DEVICES", "")
    ids = [int(part) for part in text.split(",") if part.strip().isdigit()]
    return ids[:count] if ids else list(range(count))


class GpuLoadPublisher:
    """Turns engine activity into per-GPU utilisation, memory, power and PCIe bytes, published
    with the server's processes (each GPU's scheduler holds it; see `set_processes`)."""

    def __init__(
        self, folder: Path | None, gpus: list[int], model: ModelEntry, tp: int, label: str
    ) -> None:
        self.folder = folder
        self.gpus = gpus
        self.model = model
        self.tp = max(1, tp)
        self.label = label
        self.processes: tuple[SimProcess, ...] = ()
        self._own_ticks = _ticks(os.getpid())
        self.memory_bytes = 0
        self.pcie_tx_total = 0
        self.pcie_rx_total = 0
        self._last_busy = 0.0
        self._last_tokens = 0
        self._last_time = time.monotonic()

    def set_processes(self, processes: tuple[SimProcess, ...]) -> None:
        """The server's children: schedulers name their GPU and NUMA node (the simulated
        host's NVML processes and CPU affinity), the others hold no GPU and are unbound.
        Each is published with its start time, so a reused pid is never taken for it."""
        self.processes = tuple(
            process
            if process.start_ticks is not None
            else replace(process, start_ticks=_ticks(process.pid))
            for process in processes
        )

    def set_memory(self, bytes_per_gpu: float) -> None:
        self.memory_bytes = int(min(bytes_per_gpu, GPU_MEMORY_BYTES * 0.99))

    def tick(self, busy_sim_s: float, tokens_in_steps: int, speed: float) -> None:
        """Publish load since the last tick: busy fraction -> utilisation and power."""
        now = time.monotonic()
        elapsed_real = max(1e-6, now - self._last_time)
        busy = (busy_sim_s - self._last_busy) / (speed if speed > 0 else 1.0)
        util = (
            100.0 * min(1.0, max(0.0, busy / elapsed_real))
            if speed > 0
            else (100.0 if tokens_in_steps > self._last_tokens else 0.0)
        )
        tokens = tokens_in_steps - self._last_tokens
        # Two all-reduces of the hidden state per layer per token, ring over the TP group,
        # plus a little host traffic (inputs in, logits out).
        if self.tp > 1:
            ring = 2 * (self.tp - 1) / self.tp
            per_token = self.model.layers * 2 * self.model.hidden * 2 * ring
        else:
            per_token = 0.0
        tx = int(tokens * (per_token + 64))
        rx = int(tokens * (per_token + 4 * 1024))
        self.pcie_tx_total += tx
        self.pcie_rx_total += rx
        self._last_busy = busy_sim_s
        self._last_tokens = tokens_in_steps
        self._last_time = now
        self.publish(util)

    def publish(self, util: float = 0.0) -> None:
        """Write this server's share of each GPU; power is what it adds above idle."""
        if self.folder is None:
            return
        resident = RESIDENT_POWER_W if self.memory_bytes else 0.0
        busy_power = (POWER_LIMIT_W * 0.88 - IDLE_POWER_W - RESIDENT_POWER_W) * (util / 100) ** 0.8
        load = SimGpuLoad(
            util_pct=round(util, 1),
            mem_used_bytes=self.memory_bytes,
            power_w=round(resident + busy_power, 1),
            pcie_tx_bytes_total=self.pcie_tx_total,
            pcie_rx_bytes_total=self.pcie_rx_total,
        )
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            publish(
                self.folder,
                SimPublication(
                    os.getpid(),
                    time.time(),
                    dict.fromkeys(self.gpus, load),
                    self.label,
                    self.processes,
                    self._own_ticks,
                ),
            )
        except OSError:
            pass

    def withdraw(self) -> None:
        if self.folder is not None:
            withdraw(self.folder, os.getpid())


def _ticks(pid: int) -> int | None:
    info = process_info(pid)
    return info.start_ticks if info is not None else None
