"""Per-rank level figures from requests, and the `dp-rank-imbalance` finding on them."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from console.bench.facts import CellFacts, LevelFacts
from console.bench.rank_facts import RankLevel, rank_levels
from console.bench.rank_findings import DpRankImbalance, rank_imbalances


@dataclass(frozen=True)
class Req:
    dp_rank: int | None
    output_tokens: int | None = 65
    ttft_s: float | None = 0.1
    e2e_s: float | None = 2.1
    accept_length: float | None = None


@dataclass(frozen=True, kw_only=True)
class RankedLevel(LevelFacts):
    """A level's facts with its per-rank figures (the field findings read)."""

    dp_ranks: tuple[RankLevel, ...] = ()


def test_rank_levels_split_a_level_by_the_rank_each_request_names():
    requests = [Req(0), Req(1, e2e_s=8.1, accept_length=3.0), Req(0), Req(1, accept_length=5.0)]
    ranks = rank_levels(requests, duration_s=10.0, dp_size=2)
    assert ranks == (
        RankLevel(
            rank=0,
            requests=2,
            output_tokens=130,
            output_tok_s=13.0,
            request_tok_s=32.0,
            accept_length=None,
        ),
        RankLevel(
            rank=1,
            requests=2,
            output_tokens=130,
            output_tok_s=13.0,
            request_tok_s=(64 / 8.0 + 64 / 2.0) / 2,
            accept_length=4.0,
        ),
    )
    assert RankLevel.from_json(json.loads(json.dumps(ranks[1].to_json()))) == ranks[1]


def test_a_rank_that_served_nothing_is_listed_when_the_dp_size_is_known():
    ranks = rank_levels([Req(0), Req(0)], duration_s=1.0, dp_size=2)
    assert [(r.rank, r.requests, r.output_tok_s) for r in ranks] == [(0, 2, 130.0), (1, 0, 0.0)]
    assert ranks[1].request_tok_s is None


def test_no_ranks_without_a_request_naming_one():
    """dp 1 sends `"dp_rank": null`; the OpenAI endpoints send none."""
    assert rank_levels([Req(None), Req(None)], duration_s=1.0, dp_size=1) == ()
    assert rank_levels([Req(None)], duration_s=1.0, dp_size=2) == ()


def _rank(rank: int, requests: int, speed: float | None) -> RankLevel:
    return RankLevel(
        rank=rank,
        requests=requests,
        output_tokens=requests * 64,
        output_tok_s=None,
        request_tok_s=speed,
        accept_length=None,
    )


def _cell(*levels: tuple[int, tuple[RankLevel, ...]]) -> CellFacts:
    return CellFacts(
        profile="qwen3.6-27b",
        layout="dp2",
        variant="off",
        levels=tuple(RankedLevel(concurrency=c, dp_ranks=r) for c, r in levels),
    )


def test_healthy_ranks_give_no_finding():
    healthy = (_rank(0, 8, 30.0), _rank(1, 8, 25.0))
    assert rank_imbalances([_cell((4, healthy), (8, healthy))]) == []


def test_a_starved_rank_fires_once_for_its_cell():
    starved = (_rank(0, 16, 30.0), _rank(1, 0, None))
    (finding,) = rank_imbalances([_cell((4, starved), (8, starved))])
    assert finding.kind == "dp-rank-imbalance"
    assert (finding.rank, finding.problem, finding.concurrencies) == (1, "starves", (4, 8))
    assert (finding.requests, finding.even_share) == (0, 8.0)
    assert "DP rank 1 starves: it served 0 requests where an even split gives 8" in (
        finding.message
    )


def test_a_lagging_rank_fires_with_its_speed_against_the_fastest():
    slow = (_rank(0, 8, 30.0), _rank(1, 8, 7.5))
    (finding,) = rank_imbalances([_cell((8, slow))])
    assert (finding.rank, finding.problem) == (1, "lags")
    assert (finding.request_tok_s, finding.best_request_tok_s) == (7.5, 30.0)
    assert "decode at 7.5 tok/s each against 30.0 on the fastest rank (0.25x)" in finding.message


@pytest.mark.parametrize(
    "ranks",
    [
        (_rank(0, 3, 30.0), _rank(1, 0, None)),  # too few requests for a split to mean much
        (_rank(0, 2, 30.0), _rank(1, 1, 5.0)),  # one request's speed is not compared
        (_rank(0, 8, 30.0),),  # one rank
    ],
)
def test_thin_evidence_gives_no_finding(ranks: tuple[RankLevel, ...]):
    assert rank_imbalances([_cell((8, ranks))]) == []


def test_a_finding_reads_back_from_summary_json():
    (finding,) = rank_imbalances([_cell((8, (_rank(0, 8, 30.0), _rank(1, 8, 7.5))))])
    data = json.loads(json.dumps(finding.to_json()))
    assert data["kind"] == "dp-rank-imbalance"
    assert data["concurrencies"] == [8]
    assert DpRankImbalance.from_json(data) == finding
