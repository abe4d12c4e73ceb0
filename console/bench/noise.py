"""How much a level's figures would move if it were run again: the standard error of each
compared figure, from the level's own per-request measurements (pure, plus one reader).

- a mean (acceptance length, step time): the sample standard deviation over sqrt(n);
- a percentile (TTFT, ITL, E2E p50/p99): distribution-free, from the order statistics that
  bound a 95% confidence interval of that percentile (ranks n*q -/+ 1.96*sqrt(n*q*(1-q))),
  the interval's width / (2 * 1.96); None when the interval runs past the first or the last
  request (8 requests cannot pin a p99);
- output tok/s (tokens over the level's wall time, the requests' latencies back to back):
  the value times the relative standard error of the mean end-to-end latency.

Every figure needs at least two finished requests. Failed requests (and those a stopped run
cancelled) are left out, as the summary leaves them out; ramp-up and drain requests are
kept, so the spread is, if anything, overstated and a verdict errs towards "noise".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from console.bench.results import LevelSummary, RequestResult

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


def quantile_se(values: Sequence[float], q: float) -> float | None:
    """Standard error of the q-quantile from its order-statistic 95% interval; None when
    the interval's ranks fall outside the sample."""
    ordered = sorted(values)
    n = len(ordered)
    if n < 2:
        return None
    half = Z95 * math.sqrt(n * q * (1 - q))
    low = math.floor(n * q - half)  # 1-based ranks
    high = math.ceil(n * q + half)
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


def run_errors(folder: Path, levels: Sequence[tuple[str, LevelSummary]]) -> RunErrors:
    """Each (cell id, level)'s standard errors from the run folder's `requests.jsonl` (the
    latest attempt of each level, as the summary counts it); empty when the folder has no
    per-request figures (an imported or replayed run)."""
    from console.bench.rundir import RunDir

    if not (folder / "requests.jsonl").is_file():
        return {}
    run = RunDir(folder)
    latest: dict[tuple[str, int], int] = {}
    for line in run.read_jsonl("levels.jsonl"):
        key = (str(line.get("cell")), _int(line.get("level")))
        latest[key] = max(latest.get(key, 0), _int(line.get("attempt"), 1))
    by_level: dict[tuple[str, int], list[RequestResult]] = {}
    for line in run.read_jsonl("requests.jsonl"):
        key = (str(line.get("cell")), _int(line.get("level")))
        if _int(line.get("attempt"), 1) != latest.get(key, 1):
            continue
        try:
            by_level.setdefault(key, []).append(RequestResult.from_json(line))
        except (TypeError, ValueError, OverflowError):
            continue  # a line no ddconsole wrote
    return {
        (cell, level.level): level_errors(by_level.get((cell, level.level), []), level)
        for cell, level in levels
    }


def _int(value: object, default: int = -1) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
