"""Parse SGLang's /metrics text (prometheus_client's parser) into flat, queryable samples."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]
_BLANK = re.compile(r"[ \t]")


class MetricsParseError(ValueError):
    """The text is not the Prometheus exposition format; names the first bad line."""


@dataclass(frozen=True)
class Histogram:
    """Cumulative bucket counts by upper bound (+Inf last), merged over label sets."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    total: float
    sum: float


@dataclass
class MetricsSnapshot:
    """Every sample by sample name: [(labels, value)]."""

    samples: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)

    def values(self, name: str, **match: str) -> list[float]:
        return [
            value
            for labels, value in self.samples.get(name, [])
            if all(labels.get(k) == v for k, v in match.items())
        ]

    def total(self, name: str, **match: str) -> float | None:
        """Sum over every matching series; None when the metric is absent."""
        found = self.values(name, **match)
        return math.fsum(found) if found else None

    def histogram(self, name: str) -> Histogram | None:
        """Buckets merged across every label set (DP ranks, is_streaming): never averaged."""
        by_bound: dict[float, float] = {}
        for labels, value in self.samples.get(f"{name}_bucket", []):
            le = labels.get("le")
            if le is None:
                continue
            bound = math.inf if le in ("+Inf", "Inf") else float(le)
            by_bound[bound] = by_bound.get(bound, 0.0) + value
        if not by_bound:
            return None
        bounds = tuple(sorted(by_bound))
        count = self.total(f"{name}_count")
        total_sum = self.total(f"{name}_sum")
        return Histogram(
            bounds,
            tuple(by_bound[b] for b in bounds),
            count if count is not None else by_bound[bounds[-1]],
            total_sum if total_sum is not None else 0.0,
        )


def select(text: str, names: Collection[str]) -> str:
    """Only the lines of the metrics in `names` (and their HELP/TYPE lines).

    prometheus_client's parser costs tens of microseconds a line and SGLang exposes hundreds
    of lines; the console reads a few dozen of them every second.
    """
    kept = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[2] in names:
                kept.append(line)
            continue
        end = len(line)
        for stop in ("{", " "):
            index = line.find(stop)
            if 0 <= index < end:
                end = index
        if line[:end] in names:
            kept.append(line)
    return "\n".join(kept) + "\n" if kept else ""


def metric_names(counters_and_gauges: Iterable[str], histograms: Iterable[str]) -> frozenset[str]:
    names = set(counters_and_gauges)
    for histogram in histograms:
        names |= {histogram, f"{histogram}_bucket", f"{histogram}_sum", f"{histogram}_count"}
    return frozenset(names)


def parse(text: str, names: Collection[str] | None = None) -> MetricsSnapshot:
    """Parse the exposition text; with `names`, only those metrics (see `select`)."""
    source = text if names is None else select(text, names)
    if names is not None and not source.strip() and text.strip():
        bad = _first_bad_line("\n".join(text.splitlines()[:50]))
        if bad is not None:
            raise MetricsParseError(bad)
    try:
        families = list(text_string_to_metric_families(source))
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise MetricsParseError(_first_bad_line(source) or f"unparsable metrics ({exc})") from None
    snapshot = MetricsSnapshot()
    for family in families:
        for sample in family.samples:
            snapshot.samples.setdefault(sample.name, []).append(
                (dict(sample.labels), float(sample.value))
            )
    return snapshot


class SeriesCache:
    """`parse` for one endpoint scraped again and again, with each series parsed once.

    A server exposes the same series (a metric name and one label set) on every scrape; only
    the values move. prometheus_client's parser reads each series' text the first time it is
    seen (most of its ~50 us a line goes to the labels); after that a line whose series text
    is known costs a dict lookup and a float(). Comment lines are skipped: the snapshot keys
    samples by the name on the line, which is what the parser reports for them too.
    """

    def __init__(self, max_series: int = 20_000) -> None:
        self.max_series = max_series
        self._series: dict[str, tuple[str, dict[str, str] | None]] = {}
        """Series text -> (sample name, labels); labels stay None until a caller wants them."""

    def parse(self, text: str, names: Collection[str]) -> MetricsSnapshot:
        snapshot = MetricsSnapshot()
        samples = snapshot.samples
        wanted_lines = 0
        for number, line in enumerate(text.splitlines(), start=1):
            if not line or line[0] == "#" or line.isspace():
                continue
            cut = line.rfind("}") + 1 or _name_end(line)
            series = line[:cut]
            known = self._series.get(series)
            if known is None:
                known = self._remember(series, _metric_name(series), None)
            name, labels = known
            if name not in names:
                continue
            if labels is None:
                labels = self._learn(line, number, series)
            wanted_lines += 1
            value = _value(line[cut:])
            if value is None:
                value = _parse_line(line, number)[2]
            samples.setdefault(name, []).append((dict(labels), value))
        if not wanted_lines and text.strip():
            bad = _first_bad_line("\n".join(text.splitlines()[:50]))
            if bad is not None:
                raise MetricsParseError(bad)
        return snapshot

    def _learn(self, line: str, number: int, series: str) -> dict[str, str]:
        name, labels, _ = _parse_line(line, number)
        self._remember(series, name, labels)
        return labels

    def _remember(
        self, series: str, name: str, labels: dict[str, str] | None
    ) -> tuple[str, dict[str, str] | None]:
        """Keep what a series reads as; a text whose series keep changing (values inside
        the label set) empties the cache now and then instead of growing it."""
        if len(self._series) >= self.max_series and series not in self._series:
            self._series.clear()
        entry = self._series[series] = (name, labels)
        return entry


def _name_end(line: str) -> int:
    """Where the metric name of a line without labels ends (its first blank)."""
    blank = _BLANK.search(line)
    return blank.start() if blank else len(line)


def _metric_name(series: str) -> str:
    return series.split("{", 1)[0].strip()


def _value(rest: str) -> float | None:
    """The value after a known series; None when the rest needs the full parser (a
    timestamp, an exemplar, anything unusual)."""
    parts = rest.split()
    if len(parts) != 1 or "_" in parts[0]:
        return None
    try:
        return float(parts[0])
    except ValueError:
        return None


def _parse_line(line: str, number: int) -> tuple[str, dict[str, str], float]:
    try:
        families = list(text_string_to_metric_families(line + "\n"))
    except (ValueError, IndexError, KeyError, TypeError):
        families = []
    samples = [sample for family in families for sample in family.samples]
    if len(samples) != 1:
        shown = line if len(line) <= 120 else line[:117] + "..."
        raise MetricsParseError(f"line {number} is not Prometheus text: {shown!r}")
    sample = samples[0]
    return sample.name, dict(sample.labels), float(sample.value)


def _first_bad_line(text: str) -> str | None:
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            list(text_string_to_metric_families(stripped + "\n"))
        except (ValueError, IndexError, KeyError, TypeError):
            shown = stripped if len(stripped) <= 120 else stripped[:117] + "..."
            return f"line {number} is not Prometheus text: {shown!r}"
    return None


def finite(value: float | None) -> float | None:
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return value


def non_finite_names(snapshot: MetricsSnapshot, names: Iterable[str]) -> list[str]:
    return [
        name
        for name in names
        if any(math.isnan(v) or math.isinf(v) for _, v in snapshot.samples.get(name, []))
    ]
