"""Summary statistics (pure): percentiles by linear interpolation, as numpy's default."""

from __future__ import annotations

import math
from collections.abc import Sequence

from console.bench.results import Stats

PERCENTILES = (50, 90, 95, 99)


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) of already sorted values; None when empty."""
    if not ordered:
        return None
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (rank - low))


def describe(values: Sequence[float | None]) -> Stats:
    """p50 .. p99, mean, min, max and count of the values that are numbers."""
    clean = sorted(v for v in values if v is not None and not math.isnan(v))
    p50, p90, p95, p99 = (percentile(clean, q) for q in PERCENTILES)
    return Stats(
        p50=p50,
        p90=p90,
        p95=p95,
        p99=p99,
        mean=math.fsum(clean) / len(clean) if clean else None,
        min=clean[0] if clean else None,
        max=clean[-1] if clean else None,
        count=len(clean),
    )


def mean(values: Sequence[float | None]) -> float | None:
    clean = [v for v in values if v is not None and not math.isnan(v)]
    return math.fsum(clean) / len(clean) if clean else None
