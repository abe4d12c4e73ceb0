"""Rates from counters and percentiles from histogram bucket deltas, reset-safe (pure)."""

from __future__ import annotations

import math

from console.telemetry.prometheus import Histogram


def counter_rate(previous: float | None, current: float | None, seconds: float) -> float | None:
    """Increase per second; a decrease means the counter was reset (server restart): the new
    value is then the increase since the reset, never a negative rate."""
    if previous is None or current is None or seconds <= 0:
        return None
    if math.isnan(previous) or math.isnan(current):
        return None
    delta = current - previous if current >= previous else current
    return delta / seconds


def histogram_delta(older: Histogram | None, newer: Histogram | None) -> Histogram | None:
    """Observations made between two snapshots; a reset (any count fell) keeps the newer."""
    if newer is None:
        return None
    if older is None or older.bounds != newer.bounds:
        return None
    if newer.total < older.total or any(
        n < o for n, o in zip(newer.counts, older.counts, strict=True)
    ):
        return newer
    return Histogram(
        newer.bounds,
        tuple(n - o for n, o in zip(newer.counts, older.counts, strict=True)),
        newer.total - older.total,
        newer.sum - older.sum,
    )


def quantile(q: float, histogram: Histogram | None) -> float | None:
    """Prometheus' histogram_quantile: linear interpolation inside the bucket holding rank q."""
    if histogram is None or histogram.total <= 0:
        return None
    rank = q * histogram.total
    previous_bound = 0.0
    previous_count = 0.0
    for bound, count in zip(histogram.bounds, histogram.counts, strict=True):
        if count >= rank:
            if math.isinf(bound):
                return previous_bound
            in_bucket = count - previous_count
            if in_bucket <= 0:
                return bound
            return previous_bound + (bound - previous_bound) * (rank - previous_count) / in_bucket
        previous_bound, previous_count = bound, count
    return previous_bound
