"""What findings read from a run summary (`CellFacts`, `LevelFacts`) and how a finding is
written into `summary.json`: the types the finding modules share."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from console.bench.rank_facts import RankLevel

# A finding's `summary.json` object: the serialisation boundary, not run data passed between
# modules (those pass the typed findings).
FindingJson = dict[str, Any]

FindingKind = Literal[
    "acceptance-collapse",
    "chunk-accept-mismatch",
    "cell-failed",
    "budget-scaling",
    "batching-efficiency",
    "dp-rank-imbalance",
]


def finding_json(finding: Any) -> FindingJson:
    """`kind` first, then the fields in their declared order: the keys and order
    `summary.json` has always had (tests/unit/test_summary_golden.py)."""
    return {"kind": finding.kind, **asdict(finding)}


@dataclass(frozen=True, kw_only=True)
class LevelFacts:
    """What a finding reads from one level summary (the `summary.json` level keys)."""

    concurrency: int | None
    accept_length: float | None = None
    step_time_s: float | None = None
    tokens_per_chunk: float | None = None
    chunk_accept_mismatch: float | None = None
    output_tok_s: float | None = None
    rate: float | None = None
    """An open-loop level's request rate (its concurrency is then a cap, not the load)."""
    requests: int | None = None
    """Requests the level completed (fewer than its concurrency: not that many in flight)."""
    dp_ranks: tuple[RankLevel, ...] = ()
    """Per-DP-rank figures (a server with dp > 1 whose requests named their rank)."""


@dataclass(frozen=True, kw_only=True)
class CellFacts:
    """What a finding reads from one cell of a run summary, with its level summaries."""

    profile: str | None
    layout: str | None
    variant: str | None
    algorithm: str | None = None
    architecture: str | None = None
    ddtree_budget: int | None = None
    tree_budget: int | None = None
    """The tree-drafting budget whichever flag passed it (DDTREE's too)."""
    tree_flag: str | None = None
    status: str = "done"
    reason: str | None = None
    levels: tuple[LevelFacts, ...] = ()


DDTREE_FLAG = "--speculative-ddtree-budget"


def tree_of(cell: CellFacts) -> tuple[int, str] | None:
    """A tree-drafting cell's budget and the flag that passed it (a summary that predates
    `tree_budget` has DDTREE's `ddtree_budget` only); None for any other cell."""
    if cell.tree_budget and cell.tree_flag:
        return cell.tree_budget, cell.tree_flag
    if (cell.algorithm or "").upper() == "DDTREE" and cell.ddtree_budget:
        return cell.ddtree_budget, DDTREE_FLAG
    return None


def tree_label(algorithm: str | None, flag: str) -> str:
    """How a finding names the budget: `DDTree budget`, or the algorithm's and its flag."""
    if flag == DDTREE_FLAG:
        return "DDTree budget"
    return f"{algorithm or 'tree'} tree budget ({flag})"
