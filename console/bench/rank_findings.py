"""The `dp-rank-imbalance` finding: one DP rank of a server starves or lags.

SGLang's DP controller hands requests out round robin by default and never looks at load
(sglang 0.5.23 srt/arg_groups/serving_hook.py:217-235,
srt/managers/data_parallel_controller.py:880-899). A rank that gets (almost) no requests
starves: it idles while its peers queue, and under DP attention it still runs idle batches
to keep the collectives in lockstep (`sglang:dp_attention_steps_total{rank_state="idle"}`,
srt/observability/metrics_collector.py:1144-1150). A rank whose requests decode much slower
than its peers' lags: round robin keeps giving it an equal share, so its requests pile up
and the level's tail latency is its own; under DP attention every rank waits on it each step.

Inputs are each level's per-rank figures (`RankLevel`, the `dp_ranks` of a level summary);
one finding per cell, rank and problem, naming the levels where it shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from console.bench.facts import CellFacts, FindingJson, finding_json
from console.bench.rank_facts import RankLevel

STARVE_SHARE = 0.25
"""A rank starves when it served under this share of an even split: round robin splits
exactly, a load-aware method (`total_requests`) moves a split by far less on a healthy server."""
MIN_EVEN_SHARE = 4
"""Requests an even split must give each rank before a shortfall counts: with fewer, the
round-robin counter's starting point alone (warm-up, health checks) moves the split."""
LAG_RATIO = 0.6
"""A rank lags when its requests' mean decode speed is below this share of the fastest
rank's: ranks fed round robin run batches of about the same size, so a healthy server's ranks
stay within a few tens of percent of each other."""
MIN_RANK_REQUESTS = 2
"""Finished requests a rank needs for its decode speed to be compared."""

Problem = Literal["starves", "lags"]


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True, kw_only=True)
class DpRankImbalance:
    """One DP rank of a cell's server starved or lagged at one or more levels."""

    kind: ClassVar[Literal["dp-rank-imbalance"]] = "dp-rank-imbalance"
    profile: str | None
    layout: str | None
    variant: str | None
    rank: int
    problem: Problem
    concurrencies: tuple[int | None, ...]
    """The levels where it shows (their concurrency; None for an open-loop level's)."""
    requests: int
    """At the worst level: the requests this rank served..."""
    even_share: float
    """...and an even split's share (the level's requests over its ranks)."""
    request_tok_s: float | None
    """At the worst level: this rank's mean per-request decode speed..."""
    best_request_tok_s: float | None
    """...and the fastest rank's."""
    message: str

    def to_json(self) -> FindingJson:
        data = finding_json(self)
        data["concurrencies"] = list(self.concurrencies)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DpRankImbalance:
        problem = data.get("problem")
        return cls(
            profile=_opt_str(data.get("profile")),
            layout=_opt_str(data.get("layout")),
            variant=_opt_str(data.get("variant")),
            rank=int(data["rank"]),
            problem="starves" if problem == "starves" else "lags",
            concurrencies=tuple(_opt_int(c) for c in data.get("concurrencies") or ()),
            requests=int(data.get("requests") or 0),
            even_share=float(data.get("even_share") or 0.0),
            request_tok_s=_opt_float(data.get("request_tok_s")),
            best_request_tok_s=_opt_float(data.get("best_request_tok_s")),
            message=str(data.get("message") or ""),
        )


@dataclass(frozen=True)
class _Seen:
    """One level where a rank starved or lagged."""

    concurrency: int | None
    requests: int
    even_share: float
    request_tok_s: float | None
    best_request_tok_s: float | None
    severity: float
    """Smaller is worse: the served share of an even split, or the speed ratio."""


def _level_problems(
    ranks: Sequence[RankLevel], concurrency: int | None
) -> dict[tuple[int, Problem], _Seen]:
    found: dict[tuple[int, Problem], _Seen] = {}
    if len(ranks) < 2:
        return found
    total = sum(r.requests for r in ranks)
    even = total / len(ranks)
    speeds = {
        r.rank: r.request_tok_s
        for r in ranks
        if r.request_tok_s is not None and r.requests >= MIN_RANK_REQUESTS
    }
    best = max(speeds.values(), default=None)
    for rank in ranks:
        if even >= MIN_EVEN_SHARE and rank.requests < even * STARVE_SHARE:
            found[(rank.rank, "starves")] = _Seen(
                concurrency, rank.requests, even, rank.request_tok_s, best, rank.requests / even
            )
        speed = speeds.get(rank.rank)
        if len(speeds) >= 2 and speed is not None and best and speed < best * LAG_RATIO:
            found[(rank.rank, "lags")] = _Seen(
                concurrency, rank.requests, even, speed, best, speed / best
            )
    return found


def _message(cell: CellFacts, rank: int, problem: Problem, seen: list[_Seen]) -> str:
    worst = min(seen, key=lambda s: s.severity)
    where = ", ".join("open loop" if s.concurrency is None else str(s.concurrency) for s in seen)
    head = f"{cell.profile} {cell.layout} {cell.variant}, concurrency {where}: DP rank {rank}"
    if problem == "starves":
        return (
            f"{head} starves: it served {worst.requests} requests where an even split gives "
            f"{worst.even_share:.0f}. Its peers carry the load while it idles (under DP attention "
            "it still runs idle steps in lockstep with them): check that the DP controller "
            "still routes to it (--load-balance-method, a rank marked down, a router's "
            "routed_dp_rank)."
        )
    return (
        f"{head} lags: its requests decode at {worst.request_tok_s or 0.0:.1f} tok/s each against "
        f"{worst.best_request_tok_s or 0.0:.1f} on the fastest rank ({worst.severity:.2f}x). "
        "Round robin still gives it an equal share, so its requests pile up and set the tail "
        "latency (under DP attention every rank waits on it each step): check that rank's GPUs "
        "(throttling, PCIe link width, NUMA binding)."
    )


def rank_imbalances(cells: Iterable[CellFacts]) -> list[DpRankImbalance]:
    """One finding per cell, DP rank and problem (starves, lags) over the cell's levels."""
    found: list[DpRankImbalance] = []
    for cell in cells:
        if cell.status == "failed":
            continue
        seen: dict[tuple[int, Problem], list[_Seen]] = {}
        for level in cell.levels:
            for key, one in _level_problems(level.dp_ranks, level.concurrency).items():
                seen.setdefault(key, []).append(one)
        for (rank, problem), levels in sorted(seen.items()):
            worst = min(levels, key=lambda s: s.severity)
            found.append(
                DpRankImbalance(
                    profile=cell.profile,
                    layout=cell.layout,
                    variant=cell.variant,
                    rank=rank,
                    problem=problem,
                    concurrencies=tuple(s.concurrency for s in levels),
                    requests=worst.requests,
                    even_share=worst.even_share,
                    request_tok_s=worst.request_tok_s,
                    best_request_tok_s=worst.best_request_tok_s,
                    message=_message(cell, rank, problem, levels),
                )
            )
    return found
