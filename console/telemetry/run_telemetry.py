"""A run directory's telemetry: written as recordings, read back for summaries and replay.

A run keeps what its telemetry hub polled (the GPUs and the target server) in the recording
format, one file per recorder (`telemetry-1.ddrec.gz`, `telemetry-2.ddrec.gz`: a campaign
records each cell's server in its own), each header carrying the wall-clock time of its
t=0, since a run's levels are timed on the wall clock. Runs written before that kept a
subset of each sample in `telemetry.jsonl`; those still read, the missing fields as
unavailable. Servers come from the run's cells; the host's topology is reduced to the GPUs
the telemetry names (NUMA placement is not in a run).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.telemetry.keys import SourceId
from console.telemetry.recording import (
    SUFFIX,
    Frame,
    Recording,
    RecordingError,
    RecordingWriter,
    encode_sample,
    encode_status,
    header,
    read_recording,
)
from console.telemetry.samples import (
    GpuSample,
    Sample,
    ServerSample,
    SourceState,
    SourceStatus,
)
from console.telemetry.source import PollResult

LEGACY_NAME = "telemetry.jsonl"
"""Where runs before the recording format kept their telemetry."""
RECORDING_PREFIX = "telemetry-"
_NUMBERED = re.compile(rf"^{re.escape(RECORDING_PREFIX)}(\d+){re.escape(SUFFIX)}$")


# -- where a run's telemetry is --------------------------------------------------------------


def recording_paths(run_dir: Path) -> list[Path]:
    """The run's telemetry recordings, in the order they were started."""
    if not run_dir.is_dir():
        return []
    numbered = []
    for path in run_dir.glob(f"{RECORDING_PREFIX}*{SUFFIX}"):
        match = _NUMBERED.match(path.name)
        if match is not None:
            numbered.append((int(match.group(1)), path))
    return [path for _, path in sorted(numbered)]


def telemetry_files(run_dir: Path) -> list[Path]:
    """Every file the run's telemetry is read from (recordings, or the legacy file)."""
    recordings = recording_paths(run_dir)
    legacy = run_dir / LEGACY_NAME
    return recordings + ([legacy] if legacy.is_file() else [])


def has_telemetry(run_dir: Path) -> bool:
    return bool(telemetry_files(run_dir))


def next_recording_path(run_dir: Path) -> Path:
    """A fresh numbered file for one more recorder of the run."""
    existing = [int(m.group(1)) for p in recording_paths(run_dir) if (m := _NUMBERED.match(p.name))]
    return run_dir / f"{RECORDING_PREFIX}{max(existing, default=0) + 1}{SUFFIX}"


# -- writing ---------------------------------------------------------------------------------


class RunTelemetryWriter:
    """One recorder's telemetry file: every poll result, as the hub's store took it.

    The recording writer flushes every couple of seconds, so a crash or kill loses at most
    that much. A write that fails (full disk) closes the file and says why in `error`;
    the benchmark goes on without telemetry rather than stopping.
    """

    def __init__(self, run_dir: Path, *, interval_s: float, note: str, demo: bool) -> None:
        self.error: str | None = None
        self.path = next_recording_path(run_dir)
        t0 = time.monotonic()
        head = header(
            demo=demo,
            topology={"source": "run telemetry", "gpus": [], "numa_nodes": []},
            interval_s=interval_s,
            t0_mono=t0,
            note=note,
        )
        self._writer: RecordingWriter | None = None
        try:
            self._writer = RecordingWriter(self.path, head)
        except OSError as exc:
            self.error = f"{self.path}: cannot write telemetry ({exc.strerror or exc})"

    def poll(self, now: float, result: PollResult) -> None:
        if self._writer is None:
            return
        try:
            self._writer.poll(now, result)
        except OSError as exc:
            self.error = f"{self.path}: telemetry stopped ({exc.strerror or exc})"
            self.close()

    def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except OSError as exc:
                self.error = self.error or f"{self.path}: cannot finish ({exc.strerror or exc})"


# -- reading ---------------------------------------------------------------------------------


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


def _rows(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The legacy file's complete, well-formed rows, and why reading stopped early."""
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


def _legacy_sample(row: dict[str, Any], t: float) -> Sample | None:
    """A legacy row as the sample it was cut from (fields it did not keep: None)."""
    if row.get("kind") == "gpu":
        index = int(row.get("index", 0))
        return GpuSample(
            t_mono=t,
            source=SourceId.gpu(index),
            index=index,
            name=None,
            util_pct=_number(row.get("util_pct")),
            mem_util_pct=None,
            mem_used_bytes=_int(row.get("mem_used_bytes")),
            mem_total_bytes=None,
            power_w=_number(row.get("power_w")),
            power_limit_w=None,
            temp_c=_number(row.get("temp_c")),
            sm_clock_mhz=None,
            mem_clock_mhz=None,
            pcie_tx_bytes_s=_number(row.get("pcie_tx_bytes_s")),
            pcie_rx_bytes_s=_number(row.get("pcie_rx_bytes_s")),
            pcie_gen_current=None,
            pcie_gen_max=None,
            pcie_width_current=None,
            pcie_width_max=None,
            throttle_reasons=None,
            numa_node=None,
        )
    if row.get("kind") == "server" and row.get("server"):
        server = str(row["server"])
        return ServerSample(
            t_mono=t,
            source=SourceId.server(server),
            server_id=server,
            decode_tok_s=_number(row.get("tok_s")),
            finished_tok_s=None,
            requests_s=None,
            gen_throughput=None,
            running=_number(row.get("running")),
            queued=_number(row.get("queued")),
            token_usage=_number(row.get("token_usage")),
            accept_length=_number(row.get("accept_length")),
            accept_rate=None,
            ttft_p50_s=_number(row.get("ttft_p50_s")),
            ttft_p99_s=_number(row.get("ttft_p99_s")),
            itl_p50_s=_number(row.get("itl_p50_s")),
            itl_p99_s=_number(row.get("itl_p99_s")),
            e2e_p50_s=None,
            e2e_p99_s=None,
            spec_verify_s=None,
        )
    return None


def _int(value: Any) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


@dataclass(frozen=True, slots=True)
class _Poll:
    """One poll on the wall clock: its samples and statuses (times in wall seconds)."""

    t_wall: float
    result: PollResult


def _polls(run_dir: Path) -> tuple[list[_Poll], str | None]:
    """Every poll the run kept, on the wall clock, in time order; why reading stopped short
    (the first file's damage), if it did. Both formats are read: a run begun before runs
    kept recordings and resumed since has its first cells in the legacy file."""
    polls: list[_Poll] = []
    damage: str | None = None
    for path in recording_paths(run_dir):
        try:
            recording = read_recording(path)
        except RecordingError as exc:
            damage = damage or exc.message
            continue
        damage = damage or (f"{path.name}: {recording.damage}" if recording.damage else None)
        # Decoded with t0 = the file's t0_wall, sample and status times come out as wall
        # times.
        wall = _rebased(recording, recording.t0_wall)
        for frame in recording.frames:
            if frame.kind == "poll":
                try:
                    polls.append(_Poll(recording.t0_wall + frame.t, wall.poll_result(frame)))
                except (ValueError, KeyError, TypeError) as exc:
                    damage = damage or f"{path.name}: unreadable frame at t={frame.t} ({exc})"
                    break
    legacy = run_dir / LEGACY_NAME
    if legacy.is_file():
        rows, legacy_damage = _rows(legacy)
        damage = damage or legacy_damage
        by_instant: dict[float, list[Sample]] = {}
        for row in rows:
            t = float(row["t_wall"])
            sample = _legacy_sample(row, t)
            if sample is not None:
                by_instant.setdefault(t, []).append(sample)
        for t, samples in sorted(by_instant.items()):
            statuses = [
                SourceStatus(name=s.source, state=SourceState.OK, last_ok_mono=t) for s in samples
            ]
            polls.append(_Poll(t, PollResult(samples, statuses)))
    polls.sort(key=lambda poll: poll.t_wall)
    return polls, damage


def _rebased(recording: Recording, t0: float) -> Recording:
    """The same frames read with `t0` as the time of the header's t=0."""
    return Recording(recording.path, {**recording.header, "t0_mono": t0}, recording.frames)


def run_gpu_readings(run_dir: Path) -> list[RunGpuReading]:
    """The GPU readings a run kept (none when it kept no telemetry), in time order; a
    damaged tail is dropped, as the replay does."""
    return [
        RunGpuReading(
            t_wall=sample.t_mono,
            index=sample.index,
            util_pct=sample.util_pct,
            power_w=sample.power_w,
            pcie_rx_bytes_s=sample.pcie_rx_bytes_s,
            pcie_tx_bytes_s=sample.pcie_tx_bytes_s,
        )
        for poll in _polls(run_dir)[0]
        for sample in poll.result.samples
        if isinstance(sample, GpuSample)
    ]


def is_telemetry_file(path: Path) -> bool:
    """Whether `path` is named as one of a run's telemetry files."""
    return path.name == LEGACY_NAME or _NUMBERED.match(path.name) is not None


def _run_folder(path: Path) -> Path:
    """A run directory, given it or one of its telemetry files."""
    return path.parent if is_telemetry_file(path) else path


def _gpu_name(names: Any, index: int) -> str:
    """GPU `index`'s name from a run fingerprint's `gpu_names`: "8x NVIDIA H200" names every
    GPU; a mixed host's "2x A, 6x B" is counted by name, not index, so its GPUs are "GPU"."""
    if isinstance(names, list) and index < len(names):
        return str(names[index])
    groups = names.split(", ") if isinstance(names, str) else []
    count, sep, name = groups[0].partition("x ") if len(groups) == 1 else ("", "", "")
    return name if sep and count.isdigit() else "GPU"


def recording_from_run(run_dir: Path) -> Recording:
    """`run_dir` (or one of its telemetry files) as one recording; t=0 is the first poll."""
    folder = _run_folder(run_dir)
    polls, damage = _polls(folder)
    try:
        meta = json.loads((folder / "run.json").read_text())
    except (OSError, ValueError):
        meta = {}
    if not isinstance(meta, dict):
        meta = {}
    found = meta.get("fingerprint")
    fingerprint: dict[str, Any] = found if isinstance(found, dict) else {}
    t0_wall = polls[0].t_wall if polls else 0.0
    gpus = sorted({s.index for p in polls for s in p.result.samples if isinstance(s, GpuSample)})
    topology = {
        "source": "run telemetry",
        "gpus": [
            {
                "index": g,
                "name": _gpu_name(fingerprint.get("gpu_names"), g),
                "numa_node": None,
                "cpu_affinity": [],
                "memory_total_bytes": None,
            }
            for g in gpus
        ],
        "numa_nodes": [],
    }
    head = header(
        demo=bool(fingerprint.get("demo")),
        topology=topology,
        interval_s=1.0,
        t0_mono=0.0,
        note=f"run {folder.name}",
    )
    head["t0_wall"] = t0_wall
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
    if servers:
        recording.frames.append(Frame(0.0, "servers", {"v": servers}))
    for poll in polls:
        t = round(poll.t_wall - t0_wall, 3)
        recording.frames.append(
            Frame(
                t,
                "poll",
                {
                    "s": [encode_sample(s, t0_wall) for s in poll.result.samples],
                    "st": [encode_status(s, t0_wall) for s in poll.result.statuses],
                },
            )
        )
    return recording
