"""The flight-recorder file: a compact, schema-versioned log of everything the screens show.

Format: gzip-compressed JSON lines. Line 1 is the header (`format`, `schema_version`, the
field order of every sample kind, the host's topology). Each further line is one frame:

- `{"t": 12.5, "k": "poll", "s": [[kind, [values...]], ...], "st": [[name, state, reason,
  last_ok_t, poll_s], ...]}`: one poll's samples and source states, as the poller wrote
  them to the store;
- `{"t": ..., "k": "servers", "v": [server JSON, ...]}`: the server list when it changed;
- `{"t": ..., "k": "event", "v": "text"}`: a discrete event (a launch, a run started);
- `{"t": ..., "k": "runs", "v": [run row JSON, ...]}`: every run of the results folder
  (its status, cells done, a live campaign's progress) whenever the list changed;
- `{"t": ..., "k": "run_summary", "id": run id, "v": summary JSON}`: an ended run's
  `summary.json` as it was then, once per file (a replay shows it after the run's folder is
  gone). Readers that predate this kind skip it, so the schema version is unchanged.

`t` is seconds since the header's `t0_mono`, whose wall-clock time is `t0_wall`. The
writer flushes the compressor every few seconds, so a crash or kill loses at most that much;
the reader replays a truncated or damaged file up to the damage and says where it stopped.
"""

from __future__ import annotations

import json
import math
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from console.core.errors import ConsoleError
from console.core.redact import redact_json
from console.telemetry.keys import SourceId
from console.telemetry.samples import (
    Binding,
    CostSample,
    GpuSample,
    HostSample,
    NumaLoad,
    Sample,
    ServerSample,
    SourceState,
    SourceStatus,
)
from console.telemetry.source import PollResult

FORMAT = "ddconsole-recording"
SCHEMA_VERSION = 1
SUFFIX = ".ddrec.gz"
FLUSH_EVERY_S = 2.0

KINDS: dict[str, type[Any]] = {
    "gpu": GpuSample,
    "host": HostSample,
    "server": ServerSample,
    "cost": CostSample,
}
KIND_OF = {cls: kind for kind, cls in KINDS.items()}


class RecordingError(ConsoleError):
    """A recording that cannot be read at all (not one, or from a newer ddconsole)."""


def field_names(kind: str) -> list[str]:
    return [f.name for f in fields(KINDS[kind])]


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 6)
    if isinstance(value, tuple | list):
        return [_clean(v) for v in value]
    return value


def encode_sample(sample: Sample, t0: float) -> list[Any]:
    kind = KIND_OF[type(sample)]
    values = []
    for item in fields(sample):
        value = getattr(sample, item.name)
        if item.name == "t_mono":
            value = round(value - t0, 3)
        elif item.name == "source":
            value = str(value)
        elif kind == "host" and item.name == "numa":
            value = [[n.node, _clean(n.cpu_pct), n.cpus] for n in value]
        elif kind == "host" and item.name == "bindings":
            value = [
                [
                    b.server_id,
                    list(b.intended_nodes),
                    list(b.actual_nodes),
                    b.actual_cpus,
                    b.processes,
                ]
                for b in value
            ]
        values.append(_clean(value))
    return [kind, values]


def decode_sample(kind: str, values: list[Any], names: list[str], t0: float) -> Sample:
    data = dict(zip(names, values, strict=True))
    data["t_mono"] = t0 + float(data["t_mono"])
    data["source"] = SourceId.parse(str(data["source"]))
    cls = KINDS[kind]
    if cls is HostSample:
        data["numa"] = tuple(
            NumaLoad(node=int(n), cpu_pct=c, cpus=int(k)) for n, c, k in data["numa"]
        )
        data["bindings"] = tuple(
            Binding(
                server_id=str(s),
                intended_nodes=tuple(i),
                actual_nodes=tuple(a),
                actual_cpus=int(c),
                processes=int(p),
            )
            for s, i, a, c, p in data["bindings"]
        )
    for name in ("throttle_reasons", "poll_ms", "latency_bounds"):
        if name in data and isinstance(data[name], list):
            data[name] = tuple(tuple(v) if isinstance(v, list) else v for v in data[name])
    sample: Sample = cls(**data)
    return sample


def encode_status(status: SourceStatus, t0: float) -> list[Any]:
    last_ok = None if status.last_ok_mono is None else round(status.last_ok_mono - t0, 3)
    return [
        str(status.name),
        status.state.value,
        status.reason,
        last_ok,
        _clean(status.last_poll_s),
    ]


def decode_status(values: list[Any], t0: float) -> SourceStatus:
    name, state, reason, last_ok, poll_s = values
    return SourceStatus(
        name=SourceId.parse(str(name)),
        state=SourceState(state),
        reason=reason,
        last_ok_mono=None if last_ok is None else t0 + float(last_ok),
        last_poll_s=poll_s,
    )


@dataclass
class Frame:
    t: float
    kind: str
    data: dict[str, Any]


@dataclass
class Recording:
    path: Path | None
    header: dict[str, Any]
    frames: list[Frame] = field(default_factory=list)
    damage: str | None = None
    """Why reading stopped before the end of the file (truncated, corrupted), if it did."""

    @property
    def t0(self) -> float:
        return float(self.header["t0_mono"])

    @property
    def t0_wall(self) -> float:
        """The wall-clock time of t=0 (recordings older than the `t0_wall` header key: their
        creation time, which is within a moment of it)."""
        value = self.header.get("t0_wall", self.header.get("created_wall"))
        return float(value) if isinstance(value, int | float) else 0.0

    @property
    def duration_s(self) -> float:
        return self.frames[-1].t if self.frames else 0.0

    def poll_result(self, frame: Frame) -> PollResult:
        """A poll frame as the poller produced it (timestamps back on the monotonic clock)."""
        names = {kind: list(v) for kind, v in self.header["fields"].items()}
        samples = [
            decode_sample(kind, values, names[kind], self.t0) for kind, values in frame.data["s"]
        ]
        statuses = [decode_status(v, self.t0) for v in frame.data["st"]]
        return PollResult(samples, statuses)


def header(
    *, demo: bool, topology: dict[str, Any], interval_s: float, t0_mono: float, note: str = ""
) -> dict[str, Any]:
    """`t0_wall` is the wall-clock time of `t0_mono` (wall = t0_wall + t): what lines a
    recording up with things timed on the wall clock, such as a run's levels."""
    wall, mono = time.time(), time.monotonic()
    return {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "created_wall": wall,
        "t0_mono": t0_mono,
        "t0_wall": wall - (mono - t0_mono),
        "demo": demo,
        "interval_s": interval_s,
        "fields": {kind: field_names(kind) for kind in KINDS},
        "topology": topology,
        "note": note,
    }


class RecordingWriter:
    """Appends frames to a recording; secrets are masked before anything is written.

    Compressed bytes reach the file only at a flush (every `FLUSH_EVERY_S`) and at close,
    held in memory until then, and `reserve` (if given) is told how many are about to be
    appended before they are: whoever keeps a folder under a size limit makes room first, so
    the file never takes the folder past it, not even for an instant.
    """

    def __init__(
        self,
        path: Path,
        head: dict[str, Any],
        secrets: set[str] | None = None,
        *,
        reserve: Callable[[int], None] | None = None,
    ) -> None:
        self.path = path
        self.t0 = float(head["t0_mono"])
        self.secrets = secrets or set()
        self.reserve = reserve
        path.parent.mkdir(parents=True, exist_ok=True)
        self._raw: IO[bytes] = open(path, "wb")  # noqa: SIM115 - closed by close()
        # wbits 31: a gzip member (header, deflate stream, CRC and size trailer).
        self._zlib = zlib.compressobj(6, zlib.DEFLATED, 31)
        self._pending: list[bytes] = []
        """Compressed bytes not yet in the file (the compressor emits whole blocks at times)."""
        self._flushed = time.monotonic()
        self.bytes_in = 0
        self.flush_growth = 0
        """The most one flush has added to the file: about what the next one may add."""
        # Frames come from the event loop and events from worker threads.
        self._lock = threading.Lock()
        self._line(redact_json(head, self.secrets))
        self.flush()

    def _line(self, data: dict[str, Any]) -> None:
        text = json.dumps(data, separators=(",", ":"), allow_nan=False) + "\n"
        encoded = text.encode()
        with self._lock:
            if self._raw.closed:
                return
            self.bytes_in += len(encoded)
            block = self._zlib.compress(encoded)
            if block:
                self._pending.append(block)
            if time.monotonic() - self._flushed >= FLUSH_EVERY_S:
                self._flush()

    def _t(self, mono: float) -> float:
        return round(mono - self.t0, 3)

    def poll(self, mono: float, result: PollResult) -> None:
        self._line(
            {
                "t": self._t(mono),
                "k": "poll",
                "s": [encode_sample(s, self.t0) for s in result.samples],
                "st": [encode_status(s, self.t0) for s in result.statuses],
            }
        )

    def servers(self, mono: float, servers: list[dict[str, Any]]) -> None:
        self._line({"t": self._t(mono), "k": "servers", "v": redact_json(servers, self.secrets)})

    def event(self, mono: float, text: str) -> None:
        self._line({"t": self._t(mono), "k": "event", "v": redact_json(text, self.secrets)})

    def runs(self, mono: float, rows: list[dict[str, Any]]) -> None:
        self._line({"t": self._t(mono), "k": "runs", "v": redact_json(rows, self.secrets)})

    def run_summary(self, mono: float, run_id: str, summary: dict[str, Any]) -> None:
        self._line(
            {
                "t": self._t(mono),
                "k": "run_summary",
                "id": run_id,
                "v": redact_json(summary, self.secrets),
            }
        )

    def flush(self) -> None:
        """Make everything written so far readable after a crash (a gzip sync point)."""
        with self._lock:
            if not self._raw.closed:
                self._flush()

    def _flush(self) -> None:
        self._pending.append(self._zlib.flush(zlib.Z_SYNC_FLUSH))
        self._flushed = time.monotonic()
        self.flush_growth = max(self.flush_growth, self._append())

    def _append(self) -> int:
        """Put the pending bytes in the file, `reserve` told first; how many there were."""
        data = b"".join(self._pending)
        if data:
            if self.reserve is not None:
                self.reserve(len(data))
            self._raw.write(data)
            self._raw.flush()
        self._pending.clear()
        return len(data)

    @property
    def size_bytes(self) -> int:
        """What the file holds now."""
        return self._raw.tell()

    def close(self) -> None:
        with self._lock:
            if not self._raw.closed:
                try:
                    self._pending.append(self._zlib.flush(zlib.Z_FINISH))
                    self._append()
                finally:
                    self._raw.close()


MAX_LINE_BYTES = 16 * 1024 * 1024
"""One frame (or the header) longer than this is damage: a poll frame of a busy 8-GPU host is
a few kilobytes. Reading stops there, so a gzip bomb costs at most about this much memory."""
MAX_DECOMPRESSED_BYTES = 4 * 1024 * 1024 * 1024
"""A recording's JSON is about 6x its compressed size; the README's default folder limit
(256 MB) holds well under this."""
MAX_FRAMES = 1_000_000
"""Frames kept from one recording: a day of 1 s polls is under 100 000; a file of millions of
tiny frames (a bomb that the line and size caps let through) stops here, as damage."""
READ_CHUNK = 1 << 14
"""Compressed bytes fed to the decompressor at a time (deflate expands at most ~1000x)."""


def _lines(path: Path) -> Iterator[tuple[bytes, str | None]]:
    """Complete lines of a gzip file; the last item carries why reading stopped early."""
    decompressor = zlib.decompressobj(wbits=31)
    pending = b""
    offset = 0
    expanded = 0
    damage: str | None = None
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(READ_CHUNK)
            if not chunk:
                if not decompressor.eof:
                    damage = f"the file ends early (truncated at byte {offset})"
                break
            saved = decompressor.copy()
            try:
                data = decompressor.decompress(chunk)
                offset += len(chunk)
            except zlib.error:
                # Go back to before this chunk and feed it in small pieces, to keep every
                # frame that precedes the damage.
                decompressor, data = saved, b""
                for start in range(0, len(chunk), 64):
                    try:
                        data += decompressor.decompress(chunk[start : start + 64])
                    except zlib.error as exc:
                        damage = f"corrupted data near byte {offset + start} ({exc})"
                        break
            expanded += len(data)
            if len(pending) + len(data) > MAX_LINE_BYTES and b"\n" not in data:
                damage = f"a line longer than {MAX_LINE_BYTES >> 20} MiB near byte {offset}"
                break
            pending += data
            *complete, pending = pending.split(b"\n")
            for line in complete:
                if len(line) > MAX_LINE_BYTES:
                    damage = f"a line longer than {MAX_LINE_BYTES >> 20} MiB near byte {offset}"
                    break
                yield line, None
            if damage is None and len(pending) > MAX_LINE_BYTES:
                damage = f"a line longer than {MAX_LINE_BYTES >> 20} MiB near byte {offset}"
            if damage is None and expanded > MAX_DECOMPRESSED_BYTES:
                damage = f"more than {MAX_DECOMPRESSED_BYTES >> 30} GiB of frames"
            if damage is not None:
                pending = b""
                break
            if decompressor.eof:
                if decompressor.unused_data:
                    damage = f"unexpected data after the end of the recording (byte {offset})"
                break
    if pending.strip():
        damage = damage or "the last frame is incomplete"
    if damage is not None:
        yield b"", damage


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _int_list(value: object) -> bool:
    return value is None or (isinstance(value, list) and all(_is_int(v) for v in value))


def header_problem(head: dict[str, Any]) -> str | None:
    """What is wrong with a header's fields a replay relies on (None: nothing): the clock,
    the sample field names and the topology's GPU and NUMA entries."""
    if not _is_number(head.get("t0_mono")):
        return "t0_mono is missing or not a number"
    for key in ("t0_wall", "created_wall", "interval_s"):
        if key in head and head[key] is not None and not _is_number(head[key]):
            return f"{key} is not a number"
    names = head.get("fields")
    if not isinstance(names, dict) or not all(
        isinstance(v, list) and all(isinstance(n, str) for n in v) for v in names.values()
    ):
        return "fields is not an object of name lists"
    topology = head.get("topology")
    if topology is None:
        return None
    if not isinstance(topology, dict):
        return f"topology is {type(topology).__name__}, not an object"
    for key, id_key in (("gpus", "index"), ("numa_nodes", "id")):
        items = topology.get(key, [])
        if items is None:
            continue
        if not isinstance(items, list):
            return f"topology.{key} is not a list"
        for number, item in enumerate(items):
            where = f"topology.{key}[{number}]"
            if not isinstance(item, dict):
                return f"{where} is not an object"
            if not _is_int(item.get(id_key)):
                return f"{where}.{id_key} is not an integer"
            for list_key in ("cpu_affinity", "cpus", "gpus"):
                if not _int_list(item.get(list_key)):
                    return f"{where}.{list_key} is not a list of integers"
    return None


def read_recording(path: Path) -> Recording:
    """Every readable frame of a recording; `damage` says why it stopped short, if it did."""
    try:
        lines = _lines(path)
        first, damage = next(lines, (b"", "empty file"))
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if damage is not None and not first:
        raise RecordingError(f"{path}: not a ddconsole recording ({damage})")
    try:
        head = json.loads(first)
    except RecursionError:
        raise RecordingError(f"{path}: damaged recording header (nested too deeply)") from None
    except ValueError:
        raise RecordingError(f"{path}: not a ddconsole recording (no header line)") from None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise RecordingError(f"{path}: not a ddconsole recording")
    version = head.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RecordingError(
            f"{path}: damaged recording header: schema_version {version!r} is not an integer"
        )
    if version > SCHEMA_VERSION:
        raise RecordingError(
            f"{path}: recording schema {version!r} is newer than this ddconsole reads "
            f"({SCHEMA_VERSION})",
            hint="upgrade ddconsole to replay it",
        )
    problem = header_problem(head)
    if problem is not None:
        raise RecordingError(f"{path}: damaged recording header: {problem}")
    recording = Recording(path, head)
    try:
        for line, why in lines:
            if why is not None:
                recording.damage = why
                break
            try:
                data = json.loads(line)
                frame = Frame(float(data["t"]), str(data["k"]), data)
                if not math.isfinite(frame.t):
                    raise ValueError(frame.t)
            except (ValueError, KeyError, TypeError, RecursionError):
                recording.damage = f"unreadable frame after t={recording.duration_s:.1f} s"
                break
            recording.frames.append(frame)
            if len(recording.frames) >= MAX_FRAMES:
                recording.damage = f"more than {MAX_FRAMES:,} frames; replaying the first ones"
                break
    except OSError as exc:
        recording.damage = f"read error ({exc.strerror or exc})"
    return recording


def prune(folder: Path, max_bytes: int, keep: Path | None = None) -> list[Path]:
    """Delete the oldest recordings until the folder holds at most `max_bytes` of them
    (`keep`, the file being written, is counted but never deleted)."""
    if not folder.is_dir():
        return []
    found = []
    for path in folder.glob(f"*{SUFFIX}"):
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        found.append((stat.st_mtime, path, stat.st_size))
    found.sort(key=lambda item: item[0])
    total = sum(size for _, _, size in found)
    removed = []
    for _, path, size in found:
        if total <= max_bytes:
            break
        if keep is not None and path == keep:
            continue
        path.unlink(missing_ok=True)
        total -= size
        removed.append(path)
    return removed
