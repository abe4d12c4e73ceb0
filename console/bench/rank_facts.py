"""A level's figures per DP rank, from the rank each request reports (pure).

SGLang stamps every output of a DP server with the rank that served it: the native
`/generate` stream's `meta_info["dp_rank"]` (sglang 0.5.23
srt/managers/scheduler_components/output_streamer.py:227-230, 719-723,
srt/managers/tokenizer_manager.py:2616-2617); it is null on a dp-1 server, and the OpenAI
endpoints do not carry it. A rank that served nothing reports nothing, so the server's DP
size (`dp_size` in /server_info) says which ranks there are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol


class RankedRequest(Protocol):
    """What a finished request tells about its rank (console.bench.results.RequestResult)."""

    @property
    def dp_rank(self) -> int | None: ...

    @property
    def output_tokens(self) -> int | None: ...

    @property
    def ttft_s(self) -> float | None: ...

    @property
    def e2e_s(self) -> float | None: ...

    @property
    def accept_length(self) -> float | None: ...


def _opt_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True, kw_only=True)
class RankLevel:
    """One DP rank's share of a level (the `dp_ranks` entries of a level in summary.json)."""

    rank: int
    requests: int
    """Finished requests this rank served."""
    output_tokens: int
    output_tok_s: float | None
    """This rank's output tokens over the level's wall time: the ranks add up to the level's
    output tokens over its wall time (its TOK/S counts the steady window instead)."""
    request_tok_s: float | None
    """Mean decode speed of one of its requests: (output tokens - 1) / (e2e - TTFT)."""
    accept_length: float | None
    """Mean accepted tokens per verify step of its requests; None when autoregressive."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RankLevel:
        return cls(
            rank=_int(data.get("rank")),
            requests=_int(data.get("requests")),
            output_tokens=_int(data.get("output_tokens")),
            output_tok_s=_opt_float(data.get("output_tok_s")),
            request_tok_s=_opt_float(data.get("request_tok_s")),
            accept_length=_opt_float(data.get("accept_length")),
        )


def _decode_speed(request: RankedRequest) -> float | None:
    tokens, ttft, e2e = request.output_tokens, request.ttft_s, request.e2e_s
    if not tokens or tokens < 2 or ttft is None or e2e is None or e2e <= ttft:
        return None
    return (tokens - 1) / (e2e - ttft)


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def rank_levels(
    requests: Iterable[RankedRequest], duration_s: float | None, dp_size: int | None
) -> tuple[RankLevel, ...]:
    """Per DP rank, in rank order: every rank of a server of `dp_size` ranks (one that served
    nothing with zero requests), else the ranks the requests name. Empty when no request
    names a rank (a dp-1 server, an OpenAI endpoint)."""
    by_rank: dict[int, list[RankedRequest]] = {}
    for request in requests:
        rank = request.dp_rank
        if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
            by_rank.setdefault(rank, []).append(request)
    if not by_rank:
        return ()
    ranks = set(by_rank)
    if dp_size and dp_size > 1:
        ranks |= set(range(dp_size))
    out = []
    for rank in sorted(ranks):
        served = by_rank.get(rank, [])
        tokens = sum(r.output_tokens or 0 for r in served)
        speeds = [s for r in served if (s := _decode_speed(r)) is not None]
        accepts = [a for r in served if (a := r.accept_length) is not None and a > 0]
        out.append(
            RankLevel(
                rank=rank,
                requests=len(served),
                output_tokens=tokens,
                output_tok_s=tokens / duration_s if duration_s else None,
                request_tok_s=_mean(speeds),
                accept_length=_mean(accepts),
            )
        )
    return tuple(out)
