"""A bounded time-series store: fixed-capacity ring buffers per series, a version counter.

Written only by the poller on the event loop; readers get immutable tuples. Capacity is set
at start (default one hour at one sample a second), so memory stays flat however long the
console runs. Missing values are stored as NaN and come back as None. Latest samples and
source states are kept by `SourceId`; the typed reads (`gpu`, `server`, `host`, `cost`)
return the sample class their kind holds.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from console.telemetry.keys import SourceId
from console.telemetry.samples import (
    CostSample,
    GpuSample,
    HostSample,
    Sample,
    ServerSample,
    SourceStatus,
)

DEFAULT_CAPACITY = 3600
DEFAULT_MAX_SERIES = 4096


class Ring:
    """Times and values of one series in two preallocated float arrays."""

    __slots__ = ("_head", "_size", "times", "values")

    def __init__(self, capacity: int) -> None:
        self.times = array("d", bytes(8 * capacity))
        self.values = array("d", bytes(8 * capacity))
        self._head = 0
        self._size = 0

    @property
    def capacity(self) -> int:
        return len(self.times)

    def __len__(self) -> int:
        return self._size

    def append(self, t: float, value: float) -> None:
        head, capacity = self._head, len(self.times)
        self.times[head] = t
        self.values[head] = value
        self._head = head + 1 if head + 1 < capacity else 0
        if self._size < capacity:
            self._size += 1

    def extend(self, times: Sequence[float], values: Sequence[float]) -> None:
        """Append many points at once (only the last `capacity` of them stay)."""
        capacity = len(self.times)
        if len(times) > capacity:
            times, values = times[-capacity:], values[-capacity:]
        count, head = len(times), self._head
        first = min(count, capacity - head)
        self.times[head : head + first] = array("d", times[:first])
        self.values[head : head + first] = array("d", values[:first])
        rest = count - first
        if rest:
            self.times[:rest] = array("d", times[first:])
            self.values[:rest] = array("d", values[first:])
        self._head = (head + count) % capacity
        self._size = min(capacity, self._size + count)

    def ordered(self) -> tuple[list[float], list[float]]:
        if self._size < self.capacity:
            return list(self.times[: self._size]), list(self.values[: self._size])
        head = self._head
        return (
            list(self.times[head:]) + list(self.times[:head]),
            list(self.values[head:]) + list(self.values[:head]),
        )

    def last(self) -> tuple[float, float] | None:
        if self._size == 0:
            return None
        index = (self._head - 1) % self.capacity
        return self.times[index], self.values[index]


def series_owner(key: str) -> SourceId | None:
    """The source a series key is of (`SourceId.series`): a GPU's or a server's fields, and
    the console's poll time of that source; None for the others (never freed)."""
    kind, _, rest = key.partition(".")
    if kind == "server":
        name = rest.rpartition(".")[0]
        return SourceId.server(name) if name else None
    if kind == "gpu":
        name, dot, _ = rest.partition(".")
        return SourceId("gpu", name) if dot and name.isdigit() else None
    if kind == "console" and rest.startswith("poll_ms."):
        try:
            return SourceId.parse(rest.removeprefix("poll_ms."))
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class Window:
    """An immutable view of one series: parallel tuples of times and values (None = missing)."""

    times: tuple[float, ...]
    values: tuple[float | None, ...]


class TimeSeriesStore:
    def __init__(
        self, capacity: int = DEFAULT_CAPACITY, max_series: int = DEFAULT_MAX_SERIES
    ) -> None:
        if capacity < 2:
            raise ValueError("capacity must be at least 2")
        self.capacity = capacity
        self.max_series = max_series
        self.version = 0
        self.dropped_series = 0
        """Series refused a ring: the store was full and no gone source's series could go."""
        self.freed_series = 0
        """Series of gone sources whose rings were given to new series."""
        self._series: dict[str, Ring] = {}
        self._gone: dict[SourceId, int] = {}
        """Sources forgotten (no latest sample, no state), by when: their series are the
        first to go when the store is full."""
        self._latest: dict[SourceId, Sample] = {}
        self._status: dict[SourceId, SourceStatus] = {}

    # -- writing (the poller only) -------------------------------------------------------

    def _ring(self, key: str) -> Ring | None:
        """The series' ring, made on its first point. Past `max_series` the series of the
        source gone longest are freed for it; None (counted) when no source is gone."""
        ring = self._series.get(key)
        if ring is None:
            if len(self._series) >= self.max_series and not self._free_gone():
                self.dropped_series += 1
                return None
            ring = self._series[key] = Ring(self.capacity)
        return ring

    def append(self, key: str, t: float, value: float | None) -> None:
        ring = self._series.get(key) or self._ring(key)
        if ring is not None:
            ring.append(t, math.nan if value is None else float(value))

    def extend(self, key: str, times: Sequence[float], values: Sequence[float | None]) -> None:
        """`append` of many points of one series (a replay rebuilding its history)."""
        ring = self._ring(key)
        if ring is not None:
            nan = math.nan
            ring.extend(times, [nan if value is None else float(value) for value in values])

    def _free_gone(self) -> bool:
        """Free the series of the source forgotten longest ago; False when none has any."""
        while self._gone:
            source = min(self._gone, key=self._gone.__getitem__)
            del self._gone[source]
            keys = [key for key in self._series if series_owner(key) == source]
            for key in keys:
                del self._series[key]
            if keys:
                self.freed_series += len(keys)
                return True
        return False

    def put_latest(self, sample: Sample) -> None:
        self._latest[sample.source] = sample
        self._gone.pop(sample.source, None)

    def set_status(self, status: SourceStatus) -> None:
        self._status[status.name] = status
        self._gone.pop(status.name, None)

    def forget_source(self, source: SourceId) -> None:
        """The source is no longer listed: no latest sample or state; its history stays
        until the store needs the room."""
        had = self._latest.pop(source, None) is not None
        had = self._status.pop(source, None) is not None or had
        if had:
            self._gone.setdefault(source, self.version)

    def commit(self) -> None:
        """One poll's writes are visible: readers re-render when the version moves."""
        self.version += 1

    # -- reading -------------------------------------------------------------------------

    def keys(self, prefix: str = "") -> list[str]:
        return sorted(k for k in self._series if k.startswith(prefix))

    def window(self, key: str, since: float | None = None) -> Window:
        ring = self._series.get(key)
        if ring is None:
            return Window((), ())
        times, values = ring.ordered()
        start = 0
        if since is not None:
            while start < len(times) and times[start] < since:
                start += 1
        return Window(
            tuple(times[start:]), tuple(None if math.isnan(v) else v for v in values[start:])
        )

    def latest_value(self, key: str) -> float | None:
        ring = self._series.get(key)
        last = ring.last() if ring is not None else None
        if last is None or math.isnan(last[1]):
            return None
        return last[1]

    def latest(self, source: SourceId) -> Sample | None:
        return self._latest.get(source)

    def gpu(self, index: int) -> GpuSample | None:
        sample = self._latest.get(SourceId.gpu(index))
        return sample if isinstance(sample, GpuSample) else None

    def server(self, server_id: str) -> ServerSample | None:
        sample = self._latest.get(SourceId.server(server_id))
        return sample if isinstance(sample, ServerSample) else None

    def host(self) -> HostSample | None:
        sample = self._latest.get(SourceId.HOST)
        return sample if isinstance(sample, HostSample) else None

    def cost(self) -> CostSample | None:
        sample = self._latest.get(SourceId.CONSOLE)
        return sample if isinstance(sample, CostSample) else None

    def latest_all(self) -> dict[SourceId, Sample]:
        return dict(self._latest)

    def status(self, source: SourceId) -> SourceStatus | None:
        return self._status.get(source)

    def statuses(self) -> dict[SourceId, SourceStatus]:
        return dict(self._status)

    def series_count(self) -> int:
        return len(self._series)

    def memory_bytes(self) -> int:
        return sum(16 * ring.capacity for ring in self._series.values())
