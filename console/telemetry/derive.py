"""Rates from counters and histogram bucket deltas, reset-safe (pure); quantiles are in
`console.telemetry.quantile`."""

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
