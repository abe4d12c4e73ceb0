"""A run directory's `telemetry.jsonl` as a recording, so a campaign can be replayed too.

The run keeps a subset of each sample (GPU load, server throughput, acceptance, latency);
the rest replays as unavailable. Servers come from the run's cells; the host's topology is
reduced to the GPUs the telemetry names (NUMA placement is not in a run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.telemetry.recording import Frame, Recording, encode_sample, encode_status, header
from console.telemetry.samples import (
    GpuSample,
    Sample,
    ServerSample,
    SourceState,
    SourceStatus,
)

GPU_KEEP = ("util_pct", "power_w", "mem_used_bytes", "pcie_rx_bytes_s", "pcie_tx_bytes_s", "temp_c")


def _rows(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    rows: list[dict[str, Any]] = []
    damage = None
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.endswith("\n"):
                damage = f"line {number} is incomplete (the run was stopped mid-write)"
                break
            try:
                row = json.loads(line)
            except ValueError:
                damage = f"line {number} is not JSON"
                break
            if isinstance(row, dict) and isinstance(row.get("t_wall"), int | float):
                rows.append(row)
    return rows, damage


@dataclass(frozen=True, slots=True, kw_only=True)
class RunGpuReading:
    """One GPU reading kept with a run, on the wall clock the run's levels are timed on."""

    t_wall: float
    index: int
    util_pct: float | None
    power_w: float | None
    pcie_rx_bytes_s: float | None
    pcie_tx_bytes_s: float | None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def run_gpu_readings(run_dir: Path) -> list[RunGpuReading]:
    """The GPU readings a run kept (none when it kept no telemetry); a damaged tail is
    dropped, as the replay does."""
    path = run_dir / "telemetry.jsonl"
    if not path.is_file():
        return []
    rows, _damage = _rows(path)
    return [
        RunGpuReading(
            t_wall=float(row["t_wall"]),
            index=int(row.get("index", 0)),
            util_pct=_number(row.get("util_pct")),
            power_w=_number(row.get("power_w")),
            pcie_rx_bytes_s=_number(row.get("pcie_rx_bytes_s")),
            pcie_tx_bytes_s=_number(row.get("pcie_tx_bytes_s")),
        )
        for row in rows
        if row.get("kind") == "gpu"
    ]


def _gpu(row: dict[str, Any], t: float) -> GpuSample:
    index = int(row.get("index", 0))
    values = {name: row.get(name) for name in GPU_KEEP}
    return GpuSample(
        t,
        f"gpu:{index}",
        index,
        None,
        values["util_pct"],
        None,
        values["mem_used_bytes"],
        None,
        values["power_w"],
        None,
        values["temp_c"],
        None,
        None,
        values["pcie_tx_bytes_s"],
        values["pcie_rx_bytes_s"],
        None,
        None,
        None,
        None,
        None,
        None,
    )


def _server(row: dict[str, Any], t: float) -> ServerSample:
    server = str(row.get("server"))
    return ServerSample(
        t,
        f"server:{server}",
        server,
        row.get("tok_s"),
        None,
        None,
        None,
        row.get("running"),
        row.get("queued"),
        row.get("token_usage"),
        row.get("accept_length"),
        None,
        row.get("ttft_p50_s"),
        row.get("ttft_p99_s"),
        row.get("itl_p50_s"),
        row.get("itl_p99_s"),
        None,
        None,
        None,
    )


def recording_from_run(run_dir: Path) -> Recording:
    """`run_dir` (or its telemetry.jsonl) as a recording; t=0 is the first sample."""
    folder = run_dir.parent if run_dir.name == "telemetry.jsonl" else run_dir
    rows, damage = _rows(folder / "telemetry.jsonl")
    try:
        meta = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        meta = {}
    t0_wall = min((float(r["t_wall"]) for r in rows), default=0.0)
    gpus = sorted({int(r.get("index", 0)) for r in rows if r.get("kind") == "gpu"})
    names = list(meta.get("fingerprint", {}).get("gpu_names") or [])
    topology = {
        "source": "run telemetry",
        "gpus": [
            {
                "index": g,
                "name": names[g] if g < len(names) else "GPU",
                "numa_node": None,
                "cpu_affinity": [],
                "memory_total_bytes": None,
            }
            for g in gpus
        ],
        "numa_nodes": [],
    }
    head = header(
        demo=bool(meta.get("fingerprint", {}).get("demo")),
        topology=topology,
        interval_s=1.0,
        t0_mono=0.0,
        note=f"run {folder.name}",
    )
    recording = Recording(folder, head, damage=damage)
    cells = [c for c in meta.get("cells", []) if isinstance(c, dict) and c.get("server_id")]
    servers = [
        {
            "id": c["server_id"],
            "profile": c.get("profile"),
            "layout": c.get("layout"),
            "variant": c.get("variant"),
            "state": "ready",
            "gpus": c.get("gpus") or [],
            "url": c.get("url"),
            "plan": c.get("plan") or {},
        }
        for c in cells
    ]
    by_instant: dict[float, list[dict[str, Any]]] = {}
    for row in rows:
        by_instant.setdefault(round(float(row["t_wall"]) - t0_wall, 3), []).append(row)
    if servers:
        recording.frames.append(Frame(0.0, "servers", {"v": servers}))
    for t, group in sorted(by_instant.items()):
        samples: list[Sample] = []
        for row in group:
            if row.get("kind") == "gpu":
                samples.append(_gpu(row, t))
            elif row.get("kind") == "server" and row.get("server"):
                samples.append(_server(row, t))
        statuses = [SourceStatus(s.source, SourceState.OK, None, t) for s in samples]
        recording.frames.append(
            Frame(
                t,
                "poll",
                {
                    "s": [encode_sample(s, 0.0) for s in samples],
                    "st": [encode_status(s, 0.0) for s in statuses],
                },
            )
        )
    return recording
