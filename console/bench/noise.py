"""How much a level's figures would move if it were run again: the standard error of each
compared figure, estimated by batch means from the level's own per-request measurements
(pure, plus one reader).

The requests of one closed-loop level are not independent draws: they share batches, so one
slow prefill or one long batch slows every request in flight, and a standard error computed
as if they were independent reads far too small. Batch means absorb that: the requests the
summary counted, in send order, are split into k consecutive blocks (`MIN_BLOCKS` to
`MAX_BLOCKS`, at least `MIN_BLOCK_REQUESTS` each); each figure is computed per block the way
the summary computes it over the level (a block's mean, a block's percentile, a block's
tokens over its requests' latencies for output tok/s), and its standard error is the standard
deviation of the k block values / sqrt(k), widened by Student's t for k - 1 degrees of
freedom over the normal's (few blocks pin a spread loosely). It is never taken below the
independent-sample error (the sample standard deviation / sqrt(n) for a mean; the
order-statistic interval for a percentile, which also leaves a p99 unjudged until the level
has enough requests to bound it).

This is the within-run sampling error of a level. What a rerun moves beyond it (a restarted
server, another batch interleaving, a busy host) no single run shows, which is why
`compare.NOISE_FLOOR` stands beside it: the pair is a heuristic for run-to-run noise, not a
measurement of it. A level with fewer than `MIN_BLOCKS * MIN_BLOCK_REQUESTS` counted requests
gets no standard error, so no verdict.

The requests are the ones the summary's statistics count: failed (and cancelled) ones left
out, and where the level had a steady window (`LevelSummary.window`), the ones
`steady.steady_window` selects.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from console.bench.results import CANCELLED, LevelRecord, LevelSummary, RequestResult
from console.bench.stats import percentile
from console.bench.steady import STEADY, steady_window

Z95 = 1.959964
"""Two-sided 95% normal quantile."""
T95 = {4: 2.776445, 5: 2.570582, 6: 2.446912, 7: 2.364624, 8: 2.306004, 9: 2.262157}
"""Two-sided 95% Student's t quantile by degrees of freedom (k - 1 blocks)."""

MIN_BLOCKS = 5
"""Fewer blocks than this: the spread between blocks means too little, no standard error."""
MAX_BLOCKS = 10
MIN_BLOCK_REQUESTS = 4
"""Requests per block at least (a block's percentile of fewer is hardly one)."""

LevelErrors = dict[str, float]
"""Standard error by compared metric name (`output_tok_s`, `ttft_p50_s`, ...)."""
RunErrors = dict[tuple[str, int], LevelErrors]
"""A run's `LevelErrors` by (cell id, level index)."""
BlockValue = Callable[[Sequence[RequestResult]], float | None]
"""A figure computed over some of a level's requests (None where they do not give one)."""
IidError = Callable[[Sequence[RequestResult]], float | None]
"""The same figure's standard error as if the requests were independent."""


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
    """Standard error of the q-quantile of independent values, from its order-statistic
    95% interval; None when the interval's ranks fall outside the sample."""
    ordered = sorted(values)
    n = len(ordered)
    if n < 2:
        return None
    low, high = interval_ranks(n, q)
    if low < 1 or high > n:
        return None
    return (ordered[high - 1] - ordered[low - 1]) / (2 * Z95)


def blocks(requests: Sequence[RequestResult]) -> list[list[RequestResult]]:
    """The requests in send order, split into k consecutive blocks of near-equal size (k as
    large as `MAX_BLOCKS` and `MIN_BLOCK_REQUESTS` allow); empty under `MIN_BLOCKS` blocks."""
    ordered = sorted(requests, key=lambda r: r.send_wall)
    k = min(MAX_BLOCKS, len(ordered) // MIN_BLOCK_REQUESTS)
    if k < MIN_BLOCKS:
        return []
    n = len(ordered)
    return [ordered[i * n // k : (i + 1) * n // k] for i in range(k)]


def batch_means_se(values: Sequence[float]) -> float | None:
    """Standard error of a figure from its k block values: their standard deviation /
    sqrt(k), times t(k - 1) / 1.96; None under `MIN_BLOCKS` values."""
    k = len(values)
    se = mean_se(values)
    if k < MIN_BLOCKS or se is None:
        return None
    return se * T95.get(k - 1, Z95) / Z95


def _present(values: Sequence[float | None]) -> list[float]:
    return [v for v in values if v is not None]


def _steps(requests: Sequence[RequestResult]) -> list[float]:
    """Per-request step time, as the summary computes it: decode time / verify steps."""
    out = []
    for r in requests:
        count = r.spec_verify_ct or ((r.output_tokens or 0) - 1)
        if count and r.e2e_s is not None and r.ttft_s is not None:
            out.append((r.e2e_s - r.ttft_s) / count)
    return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _tokens_per_second(requests: Sequence[RequestResult]) -> float | None:
    """Output tokens over the requests' summed latencies: one stream's rate, which times the
    concurrency is the level's (Little's law); only its spread between blocks is used."""
    latency = sum(r.e2e_s or 0.0 for r in requests if r.e2e_s is not None)
    tokens = sum(int(r.output_tokens or 0) for r in requests if r.e2e_s is not None)
    return tokens / latency if latency > 0 else None


def _throughput_iid(requests: Sequence[RequestResult]) -> float | None:
    """Relative standard error of the mean end-to-end latency, as if independent."""
    latencies = _present([r.e2e_s for r in requests])
    se, mean = mean_se(latencies), _mean(latencies)
    return se / mean if se is not None and mean else None


def _field(attr: str) -> Callable[[Sequence[RequestResult]], list[float]]:
    return lambda rs: _present([getattr(r, attr) for r in rs])


def _quantile(
    values: Callable[[Sequence[RequestResult]], list[float]], q: float
) -> tuple[BlockValue, IidError]:
    def block(rs: Sequence[RequestResult]) -> float | None:
        return percentile(sorted(values(rs)), 100 * q)

    def iid(rs: Sequence[RequestResult]) -> float | None:
        return quantile_se(values(rs), q)

    return block, iid


def _average(
    values: Callable[[Sequence[RequestResult]], list[float]],
) -> tuple[BlockValue, IidError]:
    return (lambda rs: _mean(values(rs))), (lambda rs: mean_se(values(rs)))


ESTIMATORS: Mapping[str, tuple[BlockValue, IidError]] = {
    "accept_length": _average(_field("accept_length")),
    "step_time_s": _average(_steps),
    "ttft_p50_s": _quantile(_field("ttft_s"), 0.50),
    "ttft_p99_s": _quantile(_field("ttft_s"), 0.99),
    "itl_p50_s": _quantile(_field("itl_s"), 0.50),
    "itl_p99_s": _quantile(_field("itl_s"), 0.99),
    "e2e_p50_s": _quantile(_field("e2e_s"), 0.50),
}
"""Each compared metric (but output tok/s, which `level_errors` scales) as a block's value
and as the independent-sample standard error that bounds its batch-means error from below."""


def _combined(batch: float | None, iid: float | None) -> float | None:
    """The batch-means error, never under the independent-sample one; None when either is
    unknown (an independent-sample error that cannot be had means the sample is too small
    for the figure at all, as a p99 of 40 requests)."""
    if batch is None or iid is None:
        return None
    return max(batch, iid)


def level_errors(requests: Sequence[RequestResult], level: LevelSummary) -> LevelErrors:
    """The standard errors this level's counted requests support (metrics without one, and
    every metric of a level too short for `MIN_BLOCKS` blocks, left out)."""
    ok = [r for r in requests if not r.error]
    parts = blocks(ok)
    out: LevelErrors = {}
    if not parts:
        return out
    for name, (block_value, iid_error) in ESTIMATORS.items():
        if name == "accept_length" and not level.accept_length:
            continue
        values = [block_value(part) for part in parts]
        if any(v is None for v in values):
            continue
        se = _combined(batch_means_se(_present(values)), iid_error(ok))
        if se is not None and math.isfinite(se):
            out[name] = se
    rates = [_tokens_per_second(part) for part in parts]
    mean_rate = _mean(_present(rates))
    if level.output_tok_s is not None and mean_rate and all(r is not None for r in rates):
        batch = batch_means_se(_present(rates))
        relative = _combined(None if batch is None else batch / mean_rate, _throughput_iid(ok))
        if relative is not None and math.isfinite(relative):
            out["output_tok_s"] = level.output_tok_s * relative
    return out


def in_window(
    requests: Sequence[RequestResult], level: LevelSummary, record: LevelRecord | None
) -> list[RequestResult]:
    """The requests the level's statistics count: the ones `steady.steady_window` selects
    when the level had a steady window, taken from it with the arguments the summary gives
    it; all of them (cancelled ones left out) when the level had no steady window or its
    record is missing."""
    kept = [r for r in requests if r.error != CANCELLED]
    if level.window != STEADY or record is None or record.started_wall is None:
        return kept
    window = steady_window(
        kept,
        concurrency=level.concurrency,
        rate=level.rate,
        started_wall=record.started_wall,
        duration_s=float(record.wall_s or 0.0) * record.time_scale,
        time_scale=record.time_scale,
    )
    return list(window.requests) if window.kind == STEADY else kept


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
