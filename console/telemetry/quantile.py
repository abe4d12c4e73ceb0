"""Quantiles from histogram buckets, with the bucket they fall in (pure).

A Prometheus histogram only says how many observations fell between two bounds, so a
quantile read from it is known to lie in one bucket; linear interpolation inside that bucket
picks a point that may be far from the truth. SGLang 0.5.23's default TTFT buckets start at
0.1 s (srt/observability/metrics_collector.py:1965-1985): every TTFT under 100 ms lands in
the first bucket and interpolation invents 50 and 99 ms. A `Quantile` keeps the value with
its bucket's bounds; it is shown as a number only when the bucket is narrow enough to
resolve it, and as the interval otherwise (`<100 ms`, `100-200 ms`, `>400 s`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from console.telemetry.prometheus import Histogram

RESOLVED_WIDTH = 0.25
"""A bucket resolves its quantile when its width is at most this share of its upper bound
(a 35-40 ms bucket does; 0-100 ms and 40-60 ms do not)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Quantile:
    value_s: float
    """Linear interpolation inside the bucket (Prometheus' histogram_quantile)."""
    lower_s: float
    """The bucket's lower bound (0 for the first bucket)."""
    upper_s: float | None
    """The bucket's upper bound; None above the highest finite bound (+Inf bucket)."""

    @property
    def resolved(self) -> bool:
        if self.upper_s is None:
            return False
        if self.upper_s <= 0:
            return True
        return (self.upper_s - self.lower_s) <= RESOLVED_WIDTH * self.upper_s

    def to_json(self) -> dict[str, Any]:
        return {
            "value_s": _round(self.value_s),
            "lower_s": _round(self.lower_s),
            "upper_s": None if self.upper_s is None else _round(self.upper_s),
            "resolved": self.resolved,
        }

    @classmethod
    def from_json(cls, data: object) -> Quantile | None:
        """What `to_json` wrote; None for anything else (a reading without the figure)."""
        if not isinstance(data, dict):
            return None
        value, lower, upper = data.get("value_s"), data.get("lower_s"), data.get("upper_s")
        if not isinstance(value, int | float) or not isinstance(lower, int | float):
            return None
        if upper is not None and not isinstance(upper, int | float):
            return None
        return cls(
            value_s=float(value),
            lower_s=float(lower),
            upper_s=None if upper is None else float(upper),
        )

    @classmethod
    def exact(cls, value_s: float) -> Quantile:
        """A value measured exactly (a client's own timings, a reading without bounds)."""
        return cls(value_s=value_s, lower_s=value_s, upper_s=value_s)


def _round(value: float) -> float:
    return round(value, 6)


def histogram_quantile(q: float, histogram: Histogram | None) -> Quantile | None:
    """The q-quantile of the observations in `histogram`, with the bucket it falls in;
    None when the histogram holds no observations."""
    if histogram is None or histogram.total <= 0:
        return None
    rank = q * histogram.total
    previous_bound = 0.0
    previous_count = 0.0
    for bound, count in zip(histogram.bounds, histogram.counts, strict=True):
        if count >= rank:
            if math.isinf(bound):
                return Quantile(value_s=previous_bound, lower_s=previous_bound, upper_s=None)
            in_bucket = count - previous_count
            if in_bucket <= 0:
                value = bound
            else:
                value = previous_bound + (bound - previous_bound) * (rank - previous_count) / (
                    in_bucket
                )
            return Quantile(value_s=value, lower_s=previous_bound, upper_s=bound)
        previous_bound, previous_count = bound, count
    return Quantile(value_s=previous_bound, lower_s=previous_bound, upper_s=None)


def _number(seconds: float, scale: float) -> str:
    value = seconds * scale
    if value == 0:
        return "0"
    if abs(value) >= 10:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.2f}".rstrip("0").rstrip(".")


def format_quantile(quantile: Quantile | None, *, unit: str = "ms", suffix: bool = True) -> str:
    """The quantile as the data supports it: `42 ms` when its bucket resolves it, else the
    bucket (`<100 ms`, `100-200 ms`, `>400000 ms`); `-` when there is none. `unit` is `ms`
    or `s`; without `suffix` the unit is left to a column header."""
    if quantile is None:
        return "-"
    scale = 1000.0 if unit == "ms" else 1.0
    tail = f" {unit}" if suffix else ""
    if quantile.resolved:
        return f"{_number(quantile.value_s, scale)}{tail}"
    if quantile.upper_s is None:
        return f">{_number(quantile.lower_s, scale)}{tail}"
    if quantile.lower_s <= 0:
        return f"<{_number(quantile.upper_s, scale)}{tail}"
    return f"{_number(quantile.lower_s, scale)}-{_number(quantile.upper_s, scale)}{tail}"
