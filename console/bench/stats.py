"""Summary statistics (pure): percentiles by linear interpolation, as numpy's default."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

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


def describe(values: Sequence[float | None], name: str, unit: str = "s") -> dict[str, Any]:
    """`{name}_p50_{unit}` .. `_p99_`, `_mean_`, `_min_`, `_max_` and `{name}_count`."""
    clean = sorted(v for v in values if v is not None and not math.isnan(v))
    out: dict[str, Any] = {f"{name}_p{q}_{unit}": percentile(clean, q) for q in PERCENTILES}
    out[f"{name}_mean_{unit}"] = math.fsum(clean) / len(clean) if clean else None
    out[f"{name}_min_{unit}"] = clean[0] if clean else None
    out[f"{name}_max_{unit}"] = clean[-1] if clean else None
    out[f"{name}_count"] = len(clean)
    return out


def mean(values: Sequence[float | None]) -> float | None:
    clean = [v for v in values if v is not None and not math.isnan(v)]
    return math.fsum(clean) / len(clean) if clean else None
