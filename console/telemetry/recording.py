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

import bisect
import contextlib
import json
import math
import os
import re
import tempfile
import threading
import time
import weakref
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Iterator, MutableSequence, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any, overload

from console.core.errors import ConsoleError
from console.core.redact import redact_json
from console.telemetry.keys import SourceId
from console.telemetry.quantile import Quantile
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


_FRAME_HEAD = re.compile(rb'^\{"t":(-?[0-9][0-9.eE+-]*),"k":"([a-z_]{1,32})"')
"""How the writer starts every frame line: indexing reads `t` and `k` without parsing it."""
_POLL_STATUS = re.compile(rb'"st":\[\["((?:[^"\\]|\\.)*)"')
_POLL_SAMPLE = re.compile(rb'"s":\[\["[a-z]+",\[[^,\]]*,"((?:[^"\\]|\\.)*)"')
SPOOL_WRITE = 1 << 20
"""Bytes of decompressed lines gathered before they are written to the spool."""
OTHER_KIND = 255
"""The index's code for every kind past the first 255 (a damaged or hostile file)."""
CACHE_FRAMES = 4096
"""Parsed frames a spooled recording keeps (a few MB): what a replay touches around a seek."""


def _poll_group(line: bytes) -> bytes:
    """Which source a poll frame is from, without parsing it: its first status's name (or
    its first sample's source). One source's series and latest values come only from its
    own frames, so a replay restores them from that source's last frames alone."""
    at = line.rfind(b'"st":[')
    found = _POLL_STATUS.match(line, at) if at >= 0 else None
    if found is None:
        found = _POLL_SAMPLE.search(line)
    return b"" if found is None else found[1]


def _frame_group(frame: Frame) -> bytes:
    statuses, samples = frame.data.get("st"), frame.data.get("s")
    try:
        if statuses:
            return str(statuses[0][0]).encode()
        if samples:
            return str(samples[0][1][1]).encode()
    except (IndexError, KeyError, TypeError):
        pass
    return b""


def _parse_frame(line: bytes) -> Frame:
    """One frame line (ValueError, KeyError, TypeError or RecursionError: not a frame)."""
    data = json.loads(line)
    frame = Frame(float(data["t"]), str(data["k"]), data)
    if not math.isfinite(frame.t):
        raise ValueError(frame.t)
    return frame


class Frames(MutableSequence[Frame]):
    """A recording's frames. Built in memory (a run folder's telemetry: a plain list), or
    spooled: the decompressed lines in a private temporary file (unlinked at once, gone when
    this is closed or collected) with only each frame's offset, time and kind in memory, a
    frame parsed when it is read (a bounded cache keeps the recent ones). Changing a spooled
    sequence loads it into memory first (only small, built recordings are changed)."""

    def __init__(self, items: Iterable[Frame] = ()) -> None:
        self._list: list[Frame] | None = list(items)
        self._fd: int | None = None
        """The spool: an unlinked temporary file (closed with this sequence)."""
        self._buffer = bytearray()
        self._written = 0
        self._closer: weakref.finalize[[int], Frames] | None = None
        self._offsets = array("q", [0])
        self._times = array("d")
        self._reach = array("d")
        """The latest time among frames 0..i: where a replay to T stops, by bisection."""
        self._kinds = bytearray()
        self._kind_names: list[str] = []
        self._codes: dict[str, int] = {}
        self._by_kind: dict[str, array[int]] = {}
        self._poll_groups: dict[bytes, array[int]] = {}
        """The positions of each source's poll frames."""
        self._cache: OrderedDict[int, Frame] = OrderedDict()
        self._lock = threading.Lock()
        self._ready = 0
        """Spooled frames a reader may use: indexed and written to the spool. Indexing on a
        background thread appends past it; readers never look beyond it."""
        self._published = threading.Event()
        """Set when frames were first published, or indexing ended."""
        self._stopping = False
        """close() was called: a background indexing stops at its next spool write."""
        self._indexer_thread: threading.Thread | None = None

    # -- building a spooled sequence (read_recording) -------------------------------------

    @classmethod
    def spooled(cls) -> Frames:
        """An empty spooled sequence: its file is created and unlinked at once, so nothing
        is left behind whatever happens (OSError if the temporary folder is unwritable)."""
        frames = cls()
        fd, name = tempfile.mkstemp(prefix="ddconsole-replay-")
        os.unlink(name)
        frames._list = None
        frames._fd = fd
        frames._closer = weakref.finalize(frames, os.close, fd)
        return frames

    def _indexer(self) -> Callable[[bytes, float, bytes], str | None]:
        """`add(line, t, kind)`: index one frame line (its kind as the file spells it);
        returns why the spool cannot take more, if it cannot. Built once per file with its
        arrays bound locally: indexing a million frames is this function a million times."""
        buffer, offsets, times, reach = self._buffer, self._offsets, self._times, self._reach
        kinds, codes, by_kind, groups = self._kinds, self._codes, self._by_kind, self._poll_groups
        kind_names = self._kind_names
        add_offset, add_time, add_reach, add_kind = (
            offsets.append,
            times.append,
            reach.append,
            kinds.append,
        )
        by_code: dict[bytes, tuple[int, array[int] | None]] = {}
        latest = [-math.inf]  # the latest time so far
        count = [0]

        def add(line: bytes, t: float, kind: bytes) -> str | None:
            buffer.extend(line)
            buffer.append(10)
            index = count[0]
            count[0] = index + 1
            add_offset(offsets[-1] + len(line) + 1)
            add_time(t)
            if t > latest[0]:
                latest[0] = t
            add_reach(latest[0])
            known = by_code.get(kind)
            if known is None:
                name = kind.decode()
                code = codes.get(name)
                if code is None:
                    code = len(kind_names)
                    if code >= OTHER_KIND:
                        code = OTHER_KIND  # a file of hundreds of kinds: the rest are one "other"
                    else:
                        kind_names.append(name)
                        codes[name] = code
                        by_kind[name] = array("q")
                known = by_code[kind] = (code, by_kind.get(name) if code != OTHER_KIND else None)
            code, positions = known
            add_kind(code)
            if positions is not None:
                positions.append(index)
            if kind == b"poll":
                group = _poll_group(line)
                where = groups.get(group)
                if where is None:
                    where = groups[group] = array("q")
                where.append(index)
            return self._done() if len(buffer) >= SPOOL_WRITE else None

        return add

    def _write(self) -> None:
        """Write the buffered lines to the spool and publish their frames to readers."""
        if self._stopping:
            raise OSError(0, "closed while indexing")
        assert self._fd is not None
        view = memoryview(self._buffer)
        while view:
            done = os.write(self._fd, view)
            self._written += done
            view = view[done:]
        view.release()
        self._buffer.clear()
        self._ready = len(self._times)
        self._published.set()

    def _done(self) -> str | None:
        """Indexing ended: everything indexed is readable (what is not, when the spool
        could not take it all, is dropped from the index; the reason returned)."""
        if self._fd is None:
            return None
        try:
            self._write()
        except OSError as exc:
            self._buffer.clear()
            problem = f"no room to index it in {tempfile.gettempdir()} ({exc.strerror or exc})"
        else:
            return None
        keep = bisect.bisect_right(self._offsets, self._written) - 1
        self._ready = keep  # what a failed write got onto the spool in full stays readable
        del self._offsets[keep + 1 :], self._times[keep:], self._reach[keep:], self._kinds[keep:]
        for where in (*self._by_kind.values(), *self._poll_groups.values()):
            del where[bisect.bisect_left(where, keep) :]
        return problem

    @property
    def is_spooled(self) -> bool:
        return self._list is None

    @property
    def indexing(self) -> bool:
        """Frames are still being indexed on a background thread (more will appear)."""
        thread = self._indexer_thread
        return thread is not None and thread.is_alive()

    def close(self) -> None:
        """Delete the spool (a spooled sequence is empty afterwards); a background indexing
        is stopped first."""
        thread = self._indexer_thread
        if thread is not None:
            self._stopping = True
            thread.join()
            self._indexer_thread = None
        if self._closer is not None:
            self._closer()
            self._fd, self._closer = None, None
            self._buffer = bytearray()
            self._offsets, self._times, self._reach = array("q", [0]), array("d"), array("d")
            self._kinds, self._by_kind, self._kind_names = bytearray(), {}, []
            self._codes = {}
            self._poll_groups = {}
            self._cache.clear()
            self._ready = 0

    # -- reading -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._list) if self._list is not None else self._ready

    def _load(self, index: int) -> Frame:
        with self._lock:  # a replay's seek reads on a worker thread while playback reads
            return self._load_locked(index)

    def _load_locked(self, index: int) -> Frame:
        frame = self._cache.get(index)
        if frame is not None:
            self._cache.move_to_end(index)
            return frame
        assert self._fd is not None
        start, end = self._offsets[index], self._offsets[index + 1]
        line = os.pread(self._fd, end - start - 1, start)
        try:
            frame = _parse_frame(line)
        except (ValueError, KeyError, TypeError, RecursionError):
            # Its head was readable when indexed: an empty frame, skipped by a replay.
            frame = Frame(self._times[index], self.kind_at(index), {})
        self._cache[index] = frame
        if len(self._cache) > CACHE_FRAMES:
            self._cache.popitem(last=False)
        return frame

    @overload
    def __getitem__(self, index: int) -> Frame: ...
    @overload
    def __getitem__(self, index: slice) -> list[Frame]: ...
    def __getitem__(self, index: int | slice) -> Frame | list[Frame]:
        if self._list is not None:
            return self._list[index]
        if isinstance(index, slice):
            return [self._load(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("frame index out of range")
        return self._load(index)

    def __iter__(self) -> Iterator[Frame]:
        if self._list is not None:
            return iter(list(self._list))
        return (self._load(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Frames | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def t_at(self, index: int) -> float:
        """A frame's time, without parsing it."""
        return self._list[index].t if self._list is not None else self._times[index]

    def kind_at(self, index: int) -> str:
        """A frame's kind, without parsing it."""
        if self._list is not None:
            return self._list[index].kind
        code = self._kinds[index]
        return self._kind_names[code] if code != OTHER_KIND else "?"

    def indices(self, kind: str) -> Sequence[int]:
        """The positions of every frame of one kind, in order."""
        if self._list is not None:
            return [i for i, frame in enumerate(self._list) if frame.kind == kind]
        where = self._by_kind.get(kind, array("q"))
        if not self.indexing:
            return where
        ready = self._ready  # positions past it are being indexed: left out
        return where[: bisect.bisect_left(where, ready)]

    def last_polls(self, end: int, per_source: int) -> list[int]:
        """The positions, in order, of each source's last `per_source` poll frames among
        the first `end` frames: all that a store of that capacity keeps of them."""
        if self._list is not None:
            groups: dict[bytes, list[int]] = {}
            for i, frame in enumerate(self._list[:end]):
                if frame.kind == "poll":
                    groups.setdefault(_frame_group(frame), []).append(i)
            chosen = [g[max(0, len(g) - per_source) :] for g in groups.values()]
        else:
            chosen = []
            end = min(end, self._ready)
            for where in list(self._poll_groups.values()):
                count = bisect.bisect_left(where, end)
                chosen.append(list(where[max(0, count - per_source) : count]))
        return sorted(i for part in chosen for i in part)

    def applied_at(self, position_s: float) -> int:
        """How many frames a replay applies by `position_s`: those before the first frame
        later than it (frames are applied in file order)."""
        if self._list is not None:
            for i, frame in enumerate(self._list):
                if frame.t > position_s + 1e-9:
                    return i
            return len(self._list)
        return min(bisect.bisect_right(self._reach, position_s + 1e-9), self._ready)

    # -- changing (in memory) ------------------------------------------------------------

    def _mutable(self) -> list[Frame]:
        if self._list is None:
            loaded = list(self)
            self.close()
            self._list = loaded
        return self._list

    @overload
    def __setitem__(self, index: int, value: Frame) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[Frame]) -> None: ...
    def __setitem__(self, index: int | slice, value: Frame | Iterable[Frame]) -> None:
        items = self._mutable()
        if isinstance(index, slice):
            assert not isinstance(value, Frame)
            items[index] = list(value)
        else:
            assert isinstance(value, Frame)
            items[index] = value

    def __delitem__(self, index: int | slice) -> None:
        del self._mutable()[index]

    def insert(self, index: int, value: Frame) -> None:
        self._mutable().insert(index, value)

    def sort(self, *, key: Callable[[Frame], Any]) -> None:
        self._mutable().sort(key=key)


def _frames(value: Iterable[Frame]) -> Frames:
    return value if isinstance(value, Frames) else Frames(value)


@dataclass
class Recording:
    path: Path | None
    header: dict[str, Any]
    frames: Frames = field(default_factory=Frames)
    damage: str | None = None
    """Why reading stopped before the end of the file (truncated, corrupted), if it did."""
    size_bytes: int = 0
    """The file's size when it was opened (0: built in memory)."""
    read_bytes: list[int] = field(default_factory=lambda: [0])
    """How much of the file indexing has read (one number, shared with the reader)."""
    _field_names: dict[str, list[str]] | None = field(default=None, init=False, repr=False)
    """The header's field lists, read once (a replay decodes thousands of frames a seek)."""

    def __post_init__(self) -> None:
        self.frames = _frames(self.frames)

    def close(self) -> None:
        """Delete a read recording's spool (its frames are gone afterwards)."""
        self.frames.close()

    @property
    def indexing(self) -> bool:
        """Opened with `background=True` and still indexing: frames, the duration and the
        damage note can still grow."""
        return self.frames.indexing

    @property
    def indexed_fraction(self) -> float:
        """How much of the file was read so far (1.0 when indexing is over)."""
        if not self.indexing or not self.size_bytes:
            return 1.0
        return min(1.0, self.read_bytes[0] / self.size_bytes)

    def wait_indexed(self, timeout: float | None = None) -> bool:
        """Wait for a background indexing to end; False if it is still running."""
        thread = self.frames._indexer_thread
        if thread is not None:
            thread.join(timeout)
        return not self.indexing

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
        return self.frames.t_at(len(self.frames) - 1) if len(self.frames) else 0.0

    def poll_result(self, frame: Frame) -> PollResult:
        """A poll frame as the poller produced it (timestamps back on the monotonic clock)."""
        names = self._field_names
        if names is None:
            names = self._field_names = {k: list(v) for k, v in self.header["fields"].items()}
        samples = [
            decode_sample(kind, values, names[kind], self.t0) for kind, values in frame.data["s"]
        ]
        statuses = [decode_status(v, self.t0) for v in frame.data["st"]]
        return PollResult(samples, statuses)


@dataclass
class _SeriesPlan:
    """Where one sample kind's charted values sit in its recorded value list."""

    t_at: int
    source_at: int
    series: list[tuple[str, int]]
    latency: frozenset[str]
    bounds_at: int | None
    numa_at: int | None
    poll_ms_at: int | None


def _series_plan(cls: type[Sample], names: list[str]) -> _SeriesPlan:
    where = {name: i for i, name in enumerate(names)}
    return _SeriesPlan(
        t_at=where["t_mono"],
        source_at=where["source"],
        series=[(name, where[name]) for name in cls.SERIES if name in where],
        latency=frozenset(getattr(cls, "LATENCY", ())),
        bounds_at=where.get("latency_bounds"),
        numa_at=where.get("numa") if cls is HostSample else None,
        poll_ms_at=where.get("poll_ms") if cls is CostSample else None,
    )


class SeriesReader:
    """A poll frame's store points read straight from its recorded values, with no sample
    objects: what `write_result` appends for it (a seek rebuilding history reads thousands
    of frames and needs objects only for each source's latest sample). It remembers each
    source's latest raw sample and status, decoded by `latest`."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self._names = {k: list(v) for k, v in recording.header["fields"].items()}
        self._plans: dict[str, _SeriesPlan] = {}
        self._sources: dict[str, SourceId] = {}
        self._keyed: dict[tuple[str, str], list[tuple[str, int, str | None]]] = {}
        """Per sample kind and source: each charted field's store key, its place in the
        values and, for a latency, its name (built once: the text is most of a point's cost)."""
        self._latest: dict[str, tuple[str, list[Any]]] = {}
        self._statuses: dict[str, list[Any]] = {}

    def _plan(self, kind: str) -> _SeriesPlan:
        plan = self._plans.get(kind)
        if plan is None:
            plan = self._plans[kind] = _series_plan(KINDS[kind], self._names[kind])
        return plan

    def _source(self, text: str) -> SourceId:
        source = self._sources.get(text)
        if source is None:
            source = self._sources[text] = SourceId.parse(text)
        return source

    def points(self, frame: Frame) -> list[tuple[str, float, float | None]]:
        """(series key, t, value) in `write_result`'s order; ValueError, KeyError,
        TypeError or IndexError for a frame that is not a poll as written."""
        t0 = self.recording.t0
        out: list[tuple[str, float, float | None]] = []
        latest: list[tuple[str, str, list[Any]]] = []
        keyed = self._keyed
        for kind, values in frame.data["s"]:
            plan = self._plan(kind)
            if len(values) != len(self._names[kind]):
                raise ValueError("a sample of another shape")
            source_text = str(values[plan.source_at])
            source = self._source(source_text)
            t = t0 + float(values[plan.t_at])
            columns = keyed.get((kind, source_text))
            if columns is None:
                columns = keyed[kind, source_text] = [
                    (source.series(name), at, name if name in plan.latency else None)
                    for name, at in plan.series
                ]
            bounds = None
            for key, at, latency in columns:
                value = values[at]
                kind_of_value = type(value)
                if kind_of_value is not float and kind_of_value is not int:
                    continue  # None, a bool, or damage
                if latency is not None:
                    if bounds is None:
                        bounds = () if plan.bounds_at is None else values[plan.bounds_at] or ()
                    if not _resolves(latency, value, bounds):
                        continue  # a bucket-wide percentile is no point on a chart
                out.append((key, t, float(value)))
            if plan.numa_at is not None:
                for node, cpu_pct, _cpus in values[plan.numa_at]:
                    out.append((source.series(f"numa.{int(node)}.cpu_pct"), t, cpu_pct))
            if plan.poll_ms_at is not None:
                for name, ms in values[plan.poll_ms_at]:
                    out.append((source.series(f"poll_ms.{name}"), t, ms))
            latest.append((str(source), kind, values))
        statuses = [(str(status[0]), status) for status in frame.data["st"]]
        for source_text, kind, values in latest:
            self._latest[source_text] = (kind, values)
        for name, status in statuses:
            self._statuses[name] = status
        return out

    def latest(self) -> tuple[list[Sample], list[SourceStatus]]:
        """Each source's latest sample and status among the frames read, decoded."""
        t0 = self.recording.t0
        samples, statuses = [], []
        for kind, values in self._latest.values():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                samples.append(decode_sample(kind, values, self._names[kind], t0))
        for values in self._statuses.values():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                statuses.append(decode_status(values, t0))
        return samples, statuses


def _resolves(name: str, value: float, bounds: Any) -> bool:
    """`ServerSample.resolves` on recorded values: a percentile whose bucket resolves it."""
    for field_name, lower, upper in bounds:
        if field_name == name:
            return Quantile(value_s=value, lower_s=lower, upper_s=upper).resolved
    return Quantile.exact(value).resolved


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
MAX_FRAMES = 4_000_000
"""Frames kept from one recording: an hour of 1 s polls is about 18 000 (one frame per source
per poll), a 100 MB file one to two million. Only an index entry per frame stays in memory
(about 41 bytes: ~160 MB at the cap); a file of more tiny frames (a bomb that the line and
size caps let through) stops here, as damage."""
READ_CHUNK = 1 << 14
"""Compressed bytes fed to the decompressor at a time (deflate expands at most ~1000x)."""


def _lines(path: Path, progress: list[int]) -> Generator[tuple[bytes, str | None], None, None]:
    """Complete lines of a gzip file; the last item carries why reading stopped early.
    `progress[0]` follows the compressed bytes read."""
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
            progress[0] = offset
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


def _index(recording: Recording, lines: Generator[tuple[bytes, str | None], None, None]) -> None:
    """Index every frame line into the recording's spool; `damage` says why it stopped
    short, if it did. Runs on the caller's thread or on a background one."""
    frames = recording.frames
    t_last = 0.0
    add, head_match, isfinite = frames._indexer(), _FRAME_HEAD.match, math.isfinite
    count = 0
    damage: str | None = None
    try:
        for line, why in lines:
            if why is not None:
                damage = why
                break
            match = head_match(line)
            try:
                if match is not None:
                    t, kind = float(match[1]), match[2]
                    if not isfinite(t):
                        raise ValueError(t)
                else:
                    frame = _parse_frame(line)
                    t, kind = frame.t, frame.kind.encode()
                    # Stored as the writer writes it, so that reading it back is one parse.
                    line = json.dumps(frame.data, separators=(",", ":")).encode()
            except (ValueError, KeyError, TypeError, RecursionError):
                damage = f"unreadable frame after t={t_last:.1f} s"
                break
            problem = add(line, t, kind)
            if problem is not None:
                damage = problem
                break
            t_last = t
            count += 1
            if count >= MAX_FRAMES:
                damage = f"more than {MAX_FRAMES:,} frames; replaying the first ones"
                break
    except OSError as exc:
        damage = f"read error ({exc.strerror or exc})"
    finally:
        lines.close()
    if frames._stopping:
        return  # closed while indexing: nothing is wrong with the file
    problem = frames._done()
    recording.damage = damage or problem


def _index_in_background(
    recording: Recording, lines: Generator[tuple[bytes, str | None], None, None]
) -> None:
    """`_index` on its own thread: whatever stops it early is the recording's damage, and
    the opener waiting for the first frames is always released."""
    try:
        _index(recording, lines)
    except Exception as exc:  # a thread's failure would otherwise vanish with it
        recording.damage = recording.damage or f"indexing failed ({type(exc).__name__}: {exc})"
    finally:
        recording.frames._published.set()


def read_recording(path: Path, *, background: bool = False) -> Recording:
    """Every readable frame of a recording; `damage` says why it stopped short, if it did.
    With `background`, it returns once the first frames are readable and indexes the rest
    on a thread: `frames`, `duration_s` and `damage` grow until `indexing` is False."""
    progress = [0]
    try:
        lines = _lines(path, progress)
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
    try:
        frames = Frames.spooled()
    except OSError as exc:
        raise RecordingError(
            f"{path}: cannot open: no room for its index in {tempfile.gettempdir()} "
            f"({exc.strerror or exc})",
            hint="set TMPDIR to a writable folder with space",
        ) from None
    recording = Recording(path, head, frames, read_bytes=progress)
    with contextlib.suppress(OSError):
        recording.size_bytes = path.stat().st_size
    if not background:
        _index(recording, lines)
        return recording
    thread = threading.Thread(
        target=_index_in_background,
        args=(recording, lines),
        name="ddconsole-replay-index",
        daemon=True,
    )
    frames._indexer_thread = thread
    thread.start()
    frames._published.wait()  # the first frames (or the end of a small file)
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
