"""A run directory's telemetry: written as recordings, read back for summaries and replay.

A run keeps what its telemetry hub polled (the GPUs and the target server) in the recording
format, one file per recorder (`telemetry-1.ddrec.gz`, `telemetry-2.ddrec.gz`: a campaign
records each cell's server in its own), each header carrying the wall-clock time of its
t=0, since a run's levels are timed on the wall clock. Runs written before that kept a
subset of each sample in `telemetry.jsonl`; those still read, the missing fields as
unavailable. Servers come from the run's cells, each in the state it was in at each instant
(`server_frames`); the host's topology is reduced to the GPUs the telemetry names (NUMA
placement is not in a run).
"""

from __future__ import annotations

import json
import re
import time
from bisect import bisect_right
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


# -- the run's servers over time -------------------------------------------------------------

STOPPED_AFTER_S = 0.001
"""A server shows as stopped just after its last level or poll, never at it."""


@dataclass(frozen=True, slots=True)
class _Span:
    """When a cell's server was up in one attempt of the run (wall clock): from its first
    level start or poll to its last level end or poll."""

    start: float
    end: float


def _level_rows(folder: Path) -> list[dict[str, Any]]:
    """levels.jsonl's rows as JSON objects (a torn or foreign line is skipped: the summary
    reports it, the replay goes on)."""
    try:
        text = (folder / "levels.jsonl").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _server_json(cell: dict[str, Any], state: str, reason: str | None) -> dict[str, Any]:
    """A cell's server as the server list's status JSON (what `ServerView.from_json` reads)."""
    found = cell.get("plan")
    plan: dict[str, Any] = found if isinstance(found, dict) else {}
    return {
        "id": cell["server_id"],
        "profile": cell.get("profile"),
        "layout": cell.get("layout"),
        "variant": cell.get("variant"),
        "state": state,
        "reason": reason,
        "port": plan.get("port"),
        "gpus": cell.get("gpus") or [],
        "url": cell.get("url"),
        "plan": plan,
    }


def _spans(
    cell: dict[str, Any],
    levels: list[dict[str, Any]],
    polls: list[_Poll],
    attempt_starts: list[float],
) -> list[_Span]:
    """The cell's server's up-times, one per attempt of the run that ran it (a resumed run
    relaunches the server), from the level times and the polls that reached it."""
    source = SourceId.server(str(cell["server_id"]))
    by_attempt: dict[int, list[float]] = {}

    def seen(t: float) -> None:
        by_attempt.setdefault(bisect_right(attempt_starts, t), []).append(t)

    for row in levels:
        if row.get("cell") == cell.get("cell_id"):
            for key in ("started_wall", "ended_wall"):
                t = _number(row.get(key))
                if t is not None:
                    seen(t)
    for poll in polls:
        if any(status.name == source for status in poll.result.statuses) or any(
            sample.source == source for sample in poll.result.samples
        ):
            seen(poll.t_wall)
    return [_Span(min(times), max(times)) for _, times in sorted(by_attempt.items())]


def server_frames(
    meta: dict[str, Any], levels: list[dict[str, Any]], polls: list[_Poll], t0_wall: float
) -> list[tuple[float, list[dict[str, Any]]]]:
    """The run's server list at each instant it changed, on the recording's clock.

    A campaign launches and stops one cell's server at a time: a server is absent before
    its cell first ran (the launch time is not kept), ready while its levels ran and its
    telemetry was polled, and stopped after (failed, with the cell's reason, when the cell
    failed); a run still running keeps its latest server ready. A bench run's server was
    there before the run and is not stopped by it: ready from its first level on.
    """
    cells = [c for c in meta.get("cells") or [] if isinstance(c, dict) and c.get("server_id")]
    attempt_starts = sorted(
        t
        for a in meta.get("attempts") or []
        if isinstance(a, dict) and (t := _number(a.get("started_wall"))) is not None
    )
    spans = [_spans(cell, levels, polls, attempt_starts) for cell in cells]
    campaign = meta.get("kind") == "campaign"
    latest_end = max((s.end for cell_spans in spans for s in cell_spans), default=None)
    ongoing = meta.get("status") == "running"

    def state(index: int, wall: float) -> tuple[str, str | None] | None:
        cell_spans = spans[index]
        if not cell_spans or wall < cell_spans[0].start:
            return None
        if not campaign or any(s.start <= wall <= s.end for s in cell_spans):
            return "ready", None
        last = cell_spans[-1]
        if wall > last.end:
            if ongoing and last.end == latest_end:
                return "ready", None
            cell = cells[index]
            if cell.get("status") == "failed":
                reason = cell.get("reason")
                return "failed", str(reason) if reason else None
            return "stopped", None
        return "stopped", "the run was interrupted; a later attempt ran this cell again"

    walls = sorted(
        {s.start for cell_spans in spans for s in cell_spans}
        | {s.end + STOPPED_AFTER_S for cell_spans in spans for s in cell_spans}
    )
    frames: list[tuple[float, list[dict[str, Any]]]] = []
    for wall in walls:
        servers = []
        for index, cell in enumerate(cells):
            found = state(index, wall)
            if found is not None:
                servers.append(_server_json(cell, *found))
        if not frames or servers != frames[-1][1]:
            frames.append((max(0.0, round(wall - t0_wall, 3)), servers))
    return frames


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
    live: set[str] = set()
    for t, servers in server_frames(meta, _level_rows(folder), polls, t0_wall):
        recording.frames.append(Frame(t, "servers", {"v": servers}))
        # A server the campaign stopped is no longer polled: its source says so rather
        # than keeping its last `ok`.
        ended = [s["id"] for s in servers if s["state"] != "ready" and s["id"] in live]
        live = {s["id"] for s in servers if s["state"] == "ready"}
        if ended:
            statuses = [
                SourceStatus(
                    name=SourceId.server(server_id),
                    state=SourceState.UNAVAILABLE,
                    reason="server stopped",
                    last_ok_mono=None,
                )
                for server_id in ended
            ]
            data = {"s": [], "st": [encode_status(st, t0_wall) for st in statuses]}
            recording.frames.append(Frame(t, "poll", data))
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
    # Replay applies frames in order: the server frames go in among the polls by time (a
    # stable sort keeps a server frame before a poll of the same instant).
    recording.frames.sort(key=lambda frame: frame.t)
    return recording
