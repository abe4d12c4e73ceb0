"""What findings read from a run summary (`CellFacts`, `LevelFacts`) and how a finding is
written into `summary.json`: the types the finding modules share."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

# A finding's `summary.json` object: the serialisation boundary, not run data passed between
# modules (those pass the typed findings).
FindingJson = dict[str, Any]

FindingKind = Literal[
    "acceptance-collapse",
    "chunk-accept-mismatch",
    "cell-failed",
    "budget-scaling",
    "batching-efficiency",
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


@dataclass(frozen=True, kw_only=True)
class CellFacts:
    """What a finding reads from one cell of a run summary, with its level summaries."""

    profile: str | None
    layout: str | None
    variant: str | None
    algorithm: str | None = None
    architecture: str | None = None
    ddtree_budget: int | None = None
    status: str = "done"
    reason: str | None = None
    levels: tuple[LevelFacts, ...] = ()
