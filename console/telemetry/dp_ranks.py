"""Per-DP-rank figures from one /metrics reading (pure).

A scheduler labels its series with `dp_rank` only when it has a DP rank, i.e. under
`--dp-size` > 1 or DP attention (sglang 0.5.23 srt/observability/metrics_collector.py:1391-1392;
each replica's TP-rank-0 scheduler reports, :1366-1373). A dp-1 server's series carry no such
label, and this module finds no ranks there.
"""

from __future__ import annotations

import math

from console.telemetry.derive import counter_rate
from console.telemetry.prometheus import MetricsSnapshot, finite
from console.telemetry.samples import RankFigures

DECODE_COUNTER = "sglang:realtime_tokens_total"


def by_rank(snapshot: MetricsSnapshot, name: str, **match: str) -> dict[int, float]:
    """A metric's finite values summed per `dp_rank` (series without the label left out). A
    series with a non-empty `priority` label is a per-priority breakdown of the total that
    sits under `priority=""` (metrics_collector.py:1417-1430), so it is left out too."""
    found: dict[int, float] = {}
    for labels, value in snapshot.samples.get(name, ()):
        rank = labels.get("dp_rank")
        if rank is None or not rank.isdigit() or labels.get("priority"):
            continue
        if any(labels.get(k) != v for k, v in match.items()):
            continue
        if math.isnan(value) or math.isinf(value):
            continue
        found[int(rank)] = found.get(int(rank), 0.0) + value
    return found


def decode_counters(snapshot: MetricsSnapshot) -> dict[int, float]:
    """Each rank's decode-token counter (what its tok/s is the rate of)."""
    return by_rank(snapshot, DECODE_COUNTER, mode="decode")


def rank_figures(
    snapshot: MetricsSnapshot,
    decode_now: dict[int, float],
    decode_before: dict[int, float] | None,
    seconds: float,
    *,
    speculative: bool | None,
) -> tuple[RankFigures, ...]:
    """Each DP rank's decode tok/s (its counter's rate since the previous reading), running,
    queued and acceptance length, in rank order; empty for a server without DP ranks."""
    running = by_rank(snapshot, "sglang:num_running_reqs")
    queued = by_rank(snapshot, "sglang:num_queue_reqs")
    accept = by_rank(snapshot, "sglang:spec_accept_length")
    ranks = sorted({*decode_now, *running, *queued, *accept})
    out = []
    for rank in ranks:
        tok_s = None
        if decode_before is not None:
            tok_s = finite(counter_rate(decode_before.get(rank), decode_now.get(rank), seconds))
        accept_length = accept.get(rank)
        if speculative is False or not accept_length:
            # 0 means speculative decoding is off, or no decode tick on this rank yet.
            accept_length = None
        out.append(RankFigures(rank, tok_s, running.get(rank), queued.get(rank), accept_length))
    return tuple(out)
