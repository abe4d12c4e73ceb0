"""Counters, gauges and histograms with labels, written in the Prometheus text format.

Written by hand on purpose: the simulator is an independent producer of the exposition
format, so tests of the console's parser (which uses prometheus_client) mean something.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable

Labels = tuple[tuple[str, str], ...]


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(labels: Labels, extra: tuple[tuple[str, str], ...] = ()) -> str:
    items = (*labels, *extra)
    if not items:
        return ""
    inner = ",".join(f'{k}="{v}"' for k, v in items)
    return "{" + inner + "}"


class Metric:
    kind = "untyped"

    def __init__(self, name: str, documentation: str) -> None:
        self.name = name
        self.documentation = documentation

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.documentation}", f"# TYPE {self.name} {self.kind}"]

    def lines(self) -> list[str]:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError


class Counter(Metric):
    kind = "counter"

    def __init__(self, name: str, documentation: str) -> None:
        super().__init__(name, documentation)
        self.values: dict[Labels, float] = {}

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + amount

    def get(self, labels: Labels) -> float:
        return self.values.get(labels, 0.0)

    def lines(self) -> list[str]:
        return [f"{self.name}{_labels(k)} {_fmt(v)}" for k, v in self.values.items()]

    def reset(self) -> None:
        self.values = dict.fromkeys(self.values, 0.0)


class Gauge(Metric):
    kind = "gauge"

    def __init__(self, name: str, documentation: str) -> None:
        super().__init__(name, documentation)
        self.values: dict[Labels, float] = {}

    def set(self, labels: Labels, value: float) -> None:
        self.values[labels] = value

    def get(self, labels: Labels) -> float:
        return self.values.get(labels, 0.0)

    def lines(self) -> list[str]:
        return [f"{self.name}{_labels(k)} {_fmt(v)}" for k, v in self.values.items()]

    def reset(self) -> None:
        return None


class Histogram(Metric):
    kind = "histogram"

    def __init__(self, name: str, documentation: str, buckets: Iterable[float]) -> None:
        super().__init__(name, documentation)
        self.bounds = sorted(float(b) for b in buckets)
        self.series: dict[Labels, tuple[list[float], list[float]]] = {}

    def observe(self, labels: Labels, value: float, times: float = 1.0) -> None:
        series = self.series.get(labels)
        if series is None:
            series = self.series[labels] = ([0.0] * (len(self.bounds) + 1), [0.0])
        counts, totals = series
        counts[bisect.bisect_left(self.bounds, value)] += times
        totals[0] += value * times

    def lines(self) -> list[str]:
        out = []
        for labels, (counts, totals) in self.series.items():
            cumulative = 0.0
            for bound, count in zip([*self.bounds, math.inf], counts, strict=True):
                cumulative += count
                le = "+Inf" if math.isinf(bound) else repr(bound)
                out.append(f"{self.name}_bucket{_labels(labels, (('le', le),))} {_fmt(cumulative)}")
            out.append(f"{self.name}_sum{_labels(labels)} {_fmt(totals[0])}")
            out.append(f"{self.name}_count{_labels(labels)} {_fmt(cumulative)}")
        return out

    def reset(self) -> None:
        self.series = {}


def exposition(metrics: Iterable[Metric]) -> str:
    lines: list[str] = []
    for metric in metrics:
        body = metric.lines()
        if body:
            lines += metric.header()
            lines += body
    return "\n".join(lines) + "\n"
