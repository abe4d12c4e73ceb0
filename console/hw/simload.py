"""The files demo-mode simulator processes publish their simulated GPU load in.

A simulator writes `{pid}.json` into the sim-GPU folder about once a second; the simulated
host backend reads every file of a live server and adds the load up per GPU. The file also
lists the server's processes: like NVML on a real host, a GPU's process is the scheduler that
holds its CUDA context, not the leader (sglang 0.5.23 srt/managers/scheduler.py:6362), and its
memory stays held while that scheduler lives, even orphaned. The format is plain data so the
simulator (a separate process) and the backend agree without sharing objects.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from console.core.jsonio import atomic_write_text
from console.hw.procs import is_running

SIM_GPU_DIR_ENV = "DDCONSOLE_SIM_GPU_DIR"
FRESH_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class SimGpuLoad:
    """What one simulated server puts on one physical GPU."""

    util_pct: float = 0.0
    mem_used_bytes: int = 0
    power_w: float = 0.0
    pcie_tx_bytes_total: int = 0
    pcie_rx_bytes_total: int = 0


@dataclass(frozen=True, slots=True)
class SimProcess:
    """One process of a simulated server besides its leader."""

    pid: int
    title: str
    gpu: int | None = None
    """The physical GPU whose context it holds (schedulers only)."""
    numa_node: int | None = None
    """The NUMA node its CPUs are bound to; None: unbound, it may run on every CPU."""
    start_ticks: int | None = None
    """Its start time: with the pid, its identity (None: unknown, never taken as running)."""

    def running(self) -> bool:
        return running(self.pid, self.start_ticks)


def running(pid: int, start_ticks: int | None) -> bool:
    """True when the published process is still the one that was published: a pid alone
    may have been reused by an unrelated program."""
    return start_ticks is not None and is_running(pid, start_ticks)


@dataclass(frozen=True)
class SimPublication:
    """One publisher's file: its pid, when it wrote, its load per physical GPU index, and the
    processes it started."""

    pid: int
    updated_wall: float
    gpus: dict[int, SimGpuLoad] = field(default_factory=dict)
    label: str = ""
    processes: tuple[SimProcess, ...] = ()
    start_ticks: int | None = None
    """The publisher's start time (see SimProcess.start_ticks)."""

    def gpu_owner(self, index: int) -> tuple[int, int | None]:
        """The process (pid, start time) that holds GPU `index`: its scheduler, else (none
        listed) the publisher."""
        for process in self.processes:
            if process.gpu == index:
                return process.pid, process.start_ticks
        return self.pid, self.start_ticks

    def running(self) -> bool:
        """True while the publisher or any process it lists is still that process."""
        return running(self.pid, self.start_ticks) or any(p.running() for p in self.processes)

    def process(self, pid: int) -> SimProcess | None:
        for process in self.processes:
            if process.pid == pid:
                return process
        return None


def publish(folder: Path, publication: SimPublication) -> Path:
    path = folder / f"{publication.pid}.json"
    payload: dict[str, Any] = {
        "pid": publication.pid,
        "start_ticks": publication.start_ticks,
        "updated_wall": publication.updated_wall,
        "label": publication.label,
        "processes": [asdict(process) for process in publication.processes],
        "gpus": {str(index): asdict(load) for index, load in publication.gpus.items()},
    }
    atomic_write_text(path, json.dumps(payload))
    return path


def withdraw(folder: Path, pid: int) -> None:
    try:
        (folder / f"{pid}.json").unlink()
    except FileNotFoundError:
        pass


def _optional_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _processes(raw: Any) -> tuple[SimProcess, ...]:
    found = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict) and _optional_int(item.get("pid")) is not None:
            found.append(
                SimProcess(
                    int(item["pid"]),
                    str(item.get("title", "")),
                    _optional_int(item.get("gpu")),
                    _optional_int(item.get("numa_node")),
                    _optional_int(item.get("start_ticks")),
                )
            )
    return tuple(found)


def read_publications(folder: Path, now_wall: float | None = None) -> list[SimPublication]:
    """Publications of servers with a live process; stale or unreadable files are ignored.

    A publication counts while its leader or any process it lists runs, the same process by
    pid and start time (a scheduler orphaned by a killed leader still holds its GPU's
    memory). One not rewritten for FRESH_SECONDS keeps its memory but shows no utilisation or
    power: nobody is computing on it. A file whose processes are all gone is removed, since
    its writer cannot (it was killed).
    """
    now = time.time() if now_wall is None else now_wall
    result = []
    try:
        paths = sorted(folder.glob("*.json"))
    except OSError:
        return []
    for path in paths:
        try:
            raw = json.loads(path.read_text())
            pid = int(raw["pid"])
            updated = float(raw["updated_wall"])
            gpus = {
                int(index): SimGpuLoad(
                    **{k: v for k, v in load.items() if k in SimGpuLoad.__dataclass_fields__}
                )
                for index, load in dict(raw.get("gpus", {})).items()
            }
            processes = _processes(raw.get("processes"))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        publication = SimPublication(
            pid,
            updated,
            gpus,
            str(raw.get("label", "")),
            processes,
            _optional_int(raw.get("start_ticks")),
        )
        if not publication.running():
            if now - updated > FRESH_SECONDS:
                with contextlib.suppress(OSError):
                    path.unlink()
            continue
        if now - updated > FRESH_SECONDS:
            idle = {i: replace(load, util_pct=0.0, power_w=0.0) for i, load in gpus.items()}
            publication = replace(publication, gpus=idle)
        result.append(publication)
    return result
