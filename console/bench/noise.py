"""How much a level's figures would move if it were run again: the standard error of each
compared figure, from the level's own per-request measurements (pure, plus one reader).

- a mean (acceptance length, step time): the sample standard deviation over sqrt(n);
- a percentile (TTFT, ITL, E2E p50/p99): distribution-free, from the order statistics that
  bound a 95% confidence interval of that percentile (their ranks from the binomial
  distribution of how many requests fall below it; its normal approximation past
  `EXACT_UP_TO` requests), the interval's width / (2 * 1.96); None when the interval runs
  past the first or the last request (8 requests cannot pin a p99);
- output tok/s (tokens over the level's wall time, the requests' latencies back to back):
  the value times the relative standard error of the mean end-to-end latency.

Every figure needs at least two finished requests. The requests are the ones the summary's
statistics count: failed (and cancelled) ones left out, and where the level had a steady
window (`LevelSummary.window`), only those wholly inside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from console.bench.results import LevelRecord, LevelSummary, RequestResult

Z95 = 1.959964
"""Two-sided 95% normal quantile."""

LevelErrors = dict[str, float]
"""Standard error by compared metric name (`output_tok_s`, `ttft_p50_s`, ...)."""
RunErrors = dict[tuple[str, int], LevelErrors]
"""A run's `LevelErrors` by (cell id, level index)."""
Estimator = Callable[[Sequence[RequestResult], LevelSummary], float | None]


def mean_se(values: Sequence[float]) -> float | None:
    """Standard error of the mean; None under two values."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return math.sqrt(variance) / math.sqrt(n)


EXACT_UP_TO = 400
"""Up to this many requests the interval's ranks come from the exact binomial."""
TAIL = 0.025
"""Each side's share outside the 95% interval."""


def interval_ranks(n: int, q: float) -> tuple[int, int]:
    """1-based ranks (low, high) of the order statistics bounding a >= 95% confidence
    interval of the q-quantile of n values; a rank outside 1..n where the sample is too
    small. With B the binomial(n, q) CDF: low is the largest k with B(k - 1) <= 2.5%, high
    the smallest k with B(k - 1) >= 97.5%."""
    if n > EXACT_UP_TO:
        half = Z95 * math.sqrt(n * q * (1 - q))
        return math.floor(n * q - half), math.ceil(n * q + half)
    cdf, total = [], 0.0
    for k in range(n + 1):
        total += math.comb(n, k) * q**k * (1 - q) ** (n - k)
        cdf.append(total)  # cdf[k] = P(X <= k)
    low = max((k for k in range(1, n + 2) if cdf[k - 1] <= TAIL), default=0)
    high = min((k for k in range(1, n + 1) if cdf[k - 1] >= 1 - TAIL), default=n + 1)
    return low, high


def quantile_se(values: Sequence[float], q: float) -> float | None:
    """Standard error of the q-quantile from its order-statistic 95% interval; None when
    the interval's ranks fall outside the sample."""
    ordered = sorted(values)
    n = len(ordered)
    if n < 2:
        return None
    low, high = interval_ranks(n, q)
    if low < 1 or high > n:
        return None
    return (ordered[high - 1] - ordered[low - 1]) / (2 * Z95)


def _steps(requests: Sequence[RequestResult]) -> list[float]:
    """Per-request step time, as the summary computes it: decode time / verify steps."""
    out = []
    for r in requests:
        count = r.spec_verify_ct or ((r.output_tokens or 0) - 1)
        if count and r.e2e_s is not None and r.ttft_s is not None:
            out.append((r.e2e_s - r.ttft_s) / count)
    return out


def _present(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _throughput_se(requests: Sequence[RequestResult], level: LevelSummary) -> float | None:
    latencies = _present([r.e2e_s for r in requests])
    se = mean_se(latencies)
    if se is None or level.output_tok_s is None or not latencies:
        return None
    mean = sum(latencies) / len(latencies)
    return level.output_tok_s * se / mean if mean > 0 else None


def _quantile(attr: str, q: float) -> Estimator:
    def se(requests: Sequence[RequestResult], _: LevelSummary) -> float | None:
        return quantile_se(_present([getattr(r, attr) for r in requests]), q)

    return se


ESTIMATORS: Mapping[str, Estimator] = {
    "output_tok_s": _throughput_se,
    "accept_length": lambda rs, level: (
        mean_se(_present([r.accept_length for r in rs])) if level.accept_length else None
    ),
    "step_time_s": lambda rs, _: mean_se(_steps(rs)),
    "ttft_p50_s": _quantile("ttft_s", 0.50),
    "ttft_p99_s": _quantile("ttft_s", 0.99),
    "itl_p50_s": _quantile("itl_s", 0.50),
    "itl_p99_s": _quantile("itl_s", 0.99),
    "e2e_p50_s": _quantile("e2e_s", 0.50),
}
"""Standard error of each compared metric from a level's finished requests."""


def level_errors(requests: Sequence[RequestResult], level: LevelSummary) -> LevelErrors:
    """The standard errors this level's requests support (metrics without one left out)."""
    ok = [r for r in requests if not r.error]
    out: LevelErrors = {}
    for name, estimate in ESTIMATORS.items():
        se = estimate(ok, level)
        if se is not None and math.isfinite(se):
            out[name] = se
    return out


def in_window(
    requests: Sequence[RequestResult], level: LevelSummary, record: LevelRecord | None
) -> list[RequestResult]:
    """The requests inside the level's steady window, as `steady.steady_window` picked them
    (sent after the window opened, finished before it closed); all of them when the level
    had no steady window or its record is missing."""
    start, end = level.window_start_s, level.window_end_s
    if level.window != "steady" or start is None or end is None or record is None:
        return list(requests)
    began, scale = record.started_wall or 0.0, record.time_scale or 1.0
    return [
        r
        for r in requests
        if (r.send_wall - began) * scale >= start
        and (r.send_wall + (r.e2e_s or 0.0) / scale - began) * scale <= end
    ]


def run_errors(folder: Path, levels: Sequence[tuple[str, LevelSummary]]) -> RunErrors:
    """Each (cell id, level)'s standard errors from the run folder's `requests.jsonl` (the
    latest attempt of each level, as the summary counts it); empty when the folder has no
    per-request figures (an imported or replayed run)."""
    from console.bench.rundir import RunDir

    if not (folder / "requests.jsonl").is_file():
        return {}
    run = RunDir(folder)
    # A level run again after --resume supersedes the earlier attempt (as in the summary).
    records: dict[tuple[str, int], LevelRecord] = {}
    for line in run.read_jsonl("levels.jsonl"):
        try:
            record = LevelRecord.from_json(line)
        except ValueError:
            continue
        records[(record.cell, record.level)] = record
    by_level: dict[tuple[str, int], list[RequestResult]] = {}
    for line in run.read_jsonl("requests.jsonl"):
        key = (str(line.get("cell")), _int(line.get("level")))
        known = records.get(key)
        if _int(line.get("attempt"), 1) != (known.attempt if known else 1):
            continue
        try:
            by_level.setdefault(key, []).append(RequestResult.from_json(line))
        except (TypeError, ValueError, OverflowError):
            continue  # a line no ddconsole wrote
    errors: RunErrors = {}
    for cell, level in levels:
        key = (cell, level.level)
        counted = in_window(by_level.get(key, []), level, records.get(key))
        errors[key] = level_errors(counted, level)
    return errors


def _int(value: object, default: int = -1) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
