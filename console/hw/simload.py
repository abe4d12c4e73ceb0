"""The files demo-mode simulator processes publish their simulated GPU load in.

A simulator writes `{pid}.json` into the sim-GPU folder about once a second; the simulated
host backend reads every fresh file and adds the load up per GPU. The format is plain data so
the simulator (a separate process) and the backend agree without sharing objects.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from console.core.jsonio import atomic_write_text

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


@dataclass(frozen=True)
class SimPublication:
    """One publisher's file: its pid, when it wrote, and its load per physical GPU index."""

    pid: int
    updated_wall: float
    gpus: dict[int, SimGpuLoad] = field(default_factory=dict)
    label: str = ""
    bound_nodes: tuple[int, ...] = ()
    """NUMA nodes its schedulers are bound to (empty: not bound)."""


def publish(folder: Path, publication: SimPublication) -> Path:
    path = folder / f"{publication.pid}.json"
    payload: dict[str, Any] = {
        "pid": publication.pid,
        "updated_wall": publication.updated_wall,
        "label": publication.label,
        "bound_nodes": list(publication.bound_nodes),
        "gpus": {str(index): asdict(load) for index, load in publication.gpus.items()},
    }
    atomic_write_text(path, json.dumps(payload))
    return path


def withdraw(folder: Path, pid: int) -> None:
    try:
        (folder / f"{pid}.json").unlink()
    except FileNotFoundError:
        pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_publications(folder: Path, now_wall: float | None = None) -> list[SimPublication]:
    """Fresh publications of live processes; stale or unreadable files are ignored."""
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
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if now - updated > FRESH_SECONDS or not _pid_alive(pid):
            continue
        nodes = tuple(int(n) for n in raw.get("bound_nodes", []) if isinstance(n, int))
        result.append(SimPublication(pid, updated, gpus, str(raw.get("label", "")), nodes))
    return result
