"""Findings: what a run's level summaries say across its cells, in a sentence an operator acts on.

Three kinds exist. `acceptance-collapse`: DDTree cells of one profile and layout whose
accepted tokens per step fall as the budget grows while the verify step gets no slower, so
the extra tree nodes are verified and thrown away (on the hybrid Qwen3.6 model, sibling
branches see their elder sibling's recurrent state). `chunk-accept-mismatch`: tokens per
streamed chunk disagree with the acceptance length, which a `--stream-interval` above 1 causes.
`cell-failed`: a cell that never produced its levels.

Inputs are the few facts a finding reads from a cell and its level summaries (`CellFacts`,
`LevelFacts`); outputs are typed findings whose `to_json` is the `summary.json` form.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from console.bench.facts import (
    CellFacts,
    FindingJson,
    FindingKind,
    LevelFacts,
    finding_json,
    tree_label,
    tree_of,
)
from console.bench.rank_findings import DpRankImbalance, rank_imbalances
from console.bench.scaling import (
    BatchingEfficiency,
    BudgetScaling,
    batching_efficiencies,
    budget_scalings,
)

__all__ = ["CellFacts", "FindingJson", "LevelFacts"]

# Acceptance collapse: the largest budget's acceptance is below 85% of the smallest budget's,
# no budget step raises acceptance by more than 2% (measurement noise), and the largest
# budget's step is at most 5% slower than the smallest budget's. A step that slowed by more
# would itself explain lower throughput, so the finding stays silent then.
COLLAPSE_ACCEPT_RATIO = 0.85
COLLAPSE_ACCEPT_NOISE = 1.02
COLLAPSE_STEP_SLACK = 1.05
# Tokens per chunk may differ from acceptance by up to 15% before it is worth a finding
# (the final chunk of a request and prefill-only chunks blur the per-chunk mean).
CHUNK_MISMATCH_LIMIT = 0.15

HYBRID_ARCHITECTURE = "hybrid-gdn"
HYBRID_CAUSE = (
    "the model is hybrid (attention + GDN recurrent layers): the tree's sibling branches are "
    "verified through the recurrent layers one after another, so a sibling sees the state its "
    "elder sibling left instead of its parent's; wider trees add branches that cannot be "
    "accepted"
)


def _finding_json(finding: AcceptanceCollapse | ChunkAcceptMismatch | CellFailed) -> FindingJson:
    return finding_json(finding)


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True, kw_only=True)
class AcceptanceCollapse:
    """DDTree acceptance falls as the budget grows while the verify step does not slow."""

    kind: ClassVar[FindingKind] = "acceptance-collapse"
    profile: str | None
    layout: str | None
    concurrency: int
    message: str
    cause: Literal["hybrid-gdn-sibling-state"] | None = None

    def to_json(self) -> FindingJson:
        return _finding_json(self)


@dataclass(frozen=True, kw_only=True)
class ChunkAcceptMismatch:
    """Tokens per streamed chunk disagree with the acceptance length by more than the limit."""

    kind: ClassVar[FindingKind] = "chunk-accept-mismatch"
    profile: str | None
    layout: str | None
    concurrency: int | None
    message: str

    def to_json(self) -> FindingJson:
        return _finding_json(self)


@dataclass(frozen=True, kw_only=True)
class CellFailed:
    """A cell that failed (server did not start, died mid-run) with its reason."""

    kind: ClassVar[FindingKind] = "cell-failed"
    profile: str | None
    layout: str | None
    variant: str | None
    message: str

    def to_json(self) -> FindingJson:
        return _finding_json(self)


Finding = (
    AcceptanceCollapse
    | ChunkAcceptMismatch
    | CellFailed
    | BudgetScaling
    | BatchingEfficiency
    | DpRankImbalance
)


def finding_from_json(data: Mapping[str, Any]) -> Finding:
    """A finding read back from its `summary.json` form."""
    kind = data.get("kind")
    profile, layout = _opt_str(data.get("profile")), _opt_str(data.get("layout"))
    message = str(data.get("message") or "")
    if kind == AcceptanceCollapse.kind:
        cause = data.get("cause")
        return AcceptanceCollapse(
            profile=profile,
            layout=layout,
            concurrency=int(data["concurrency"]),
            message=message,
            cause="hybrid-gdn-sibling-state" if cause == "hybrid-gdn-sibling-state" else None,
        )
    if kind == ChunkAcceptMismatch.kind:
        return ChunkAcceptMismatch(
            profile=profile,
            layout=layout,
            concurrency=_opt_int(data.get("concurrency")),
            message=message,
        )
    if kind == CellFailed.kind:
        return CellFailed(
            profile=profile, layout=layout, variant=_opt_str(data.get("variant")), message=message
        )
    if kind == BudgetScaling.kind:
        return BudgetScaling.from_json(data)
    if kind == BatchingEfficiency.kind:
        return BatchingEfficiency.from_json(data)
    if kind == DpRankImbalance.kind:
        return DpRankImbalance.from_json(data)
    raise ValueError(f"unknown finding kind {kind!r}")


@dataclass(frozen=True, kw_only=True)
class _BudgetPoint:
    budget: int
    accept: float
    step_s: float
    architecture: str | None


def _is_collapse(points: Sequence[_BudgetPoint]) -> bool:
    first, last = points[0], points[-1]
    accept_falls = last.accept < first.accept * COLLAPSE_ACCEPT_RATIO and all(
        b.accept <= a.accept * COLLAPSE_ACCEPT_NOISE for a, b in itertools.pairwise(points)
    )
    return accept_falls and last.step_s <= first.step_s * COLLAPSE_STEP_SLACK


def acceptance_collapses(cells: Iterable[CellFacts]) -> list[AcceptanceCollapse]:
    """One finding per (profile, layout, tree algorithm and flag, concurrency) whose tree
    budgets show a collapse (DDTree's, or any tree-drafting variant's `tree_budget`).

    A level counts when it has both an acceptance and a step time; at least two budgets must
    have one at the same concurrency.
    """
    groups: dict[tuple[str | None, str | None, str | None, str], list[CellFacts]] = defaultdict(
        list
    )
    budget_of: dict[int, int] = {}
    for cell in cells:
        tree = tree_of(cell)
        if tree is not None:
            groups[(cell.profile, cell.layout, cell.algorithm, tree[1])].append(cell)
            budget_of[id(cell)] = tree[0]
    found: list[AcceptanceCollapse] = []
    for (profile, layout, algorithm, flag), group in groups.items():
        if len(group) < 2:
            continue
        group.sort(key=lambda c: budget_of[id(c)])
        concurrencies = {lv.concurrency for c in group for lv in c.levels}
        for concurrency in sorted(x for x in concurrencies if x is not None):
            points: list[_BudgetPoint] = []
            for cell in group:
                level = next(
                    (
                        lv
                        for lv in cell.levels
                        if lv.concurrency == concurrency and lv.accept_length and lv.step_time_s
                    ),
                    None,
                )
                if level and level.accept_length and level.step_time_s:
                    points.append(
                        _BudgetPoint(
                            budget=budget_of[id(cell)],
                            accept=level.accept_length,
                            step_s=level.step_time_s,
                            architecture=cell.architecture,
                        )
                    )
            if len(points) < 2 or not _is_collapse(points):
                continue
            # The smallest budget measured names the architecture (one profile, one model).
            hybrid = points[0].architecture == HYBRID_ARCHITECTURE
            found.append(
                AcceptanceCollapse(
                    profile=profile,
                    layout=layout,
                    concurrency=concurrency,
                    message=_collapse_message(
                        profile, layout, concurrency, points, hybrid, tree_label(algorithm, flag)
                    ),
                    cause="hybrid-gdn-sibling-state" if hybrid else None,
                )
            )
    return found


def _collapse_message(
    profile: str | None,
    layout: str | None,
    concurrency: int,
    points: Sequence[_BudgetPoint],
    hybrid: bool,
    label: str,
) -> str:
    budgets = " -> ".join(str(p.budget) for p in points)
    accepts = " -> ".join(f"{p.accept:.1f}" for p in points)
    steps = " -> ".join(f"{p.step_s * 1000:.0f}" for p in points)
    message = (
        f"{profile} {layout}, concurrency {concurrency}: acceptance collapses as "
        f"the {label} grows ({budgets}): accepted tokens per step "
        f"{accepts}, while the step is no slower than at the smallest budget ({steps} ms). "
        "The extra tree nodes are verified but not accepted."
    )
    if hybrid:
        message += f" Likely cause: {HYBRID_CAUSE}."
    return message


def chunk_accept_mismatches(cells: Iterable[CellFacts]) -> list[ChunkAcceptMismatch]:
    """Levels whose tokens per streamed chunk differ from acceptance by more than the limit.

    With SGLang's default `--stream-interval 1` every decode step streams one chunk holding
    all tokens that step committed (sglang 0.5.23
    srt/managers/scheduler_components/output_streamer.py:459-468; default 1 at
    srt/arg_groups/fields/serving.py:262-265; flag name from the field,
    srt/arg_groups/arg_utils.py:290), so tokens per chunk should match acceptance.
    """
    found: list[ChunkAcceptMismatch] = []
    for cell in cells:
        for level in cell.levels:
            mismatch = level.chunk_accept_mismatch
            if mismatch is None or mismatch <= CHUNK_MISMATCH_LIMIT:
                continue
            found.append(
                ChunkAcceptMismatch(
                    profile=cell.profile,
                    layout=cell.layout,
                    concurrency=level.concurrency,
                    message=(
                        f"{cell.profile} {cell.layout} {cell.variant}: tokens "
                        f"per streamed chunk ({level.tokens_per_chunk or 0.0:.2f}) differ "
                        f"from the acceptance length ({level.accept_length or 0.0:.2f}) "
                        f"by {mismatch:.0%}: check --stream-interval"
                    ),
                )
            )
    return found


def cell_failures(cells: Iterable[CellFacts]) -> list[CellFailed]:
    return [
        CellFailed(
            profile=cell.profile,
            layout=cell.layout,
            variant=cell.variant,
            message=f"{cell.profile} {cell.layout} {cell.variant} failed: {cell.reason}",
        )
        for cell in cells
        if cell.status == "failed"
    ]


def find_all(cells: Sequence[CellFacts]) -> list[Finding]:
    """Every finding of a run: collapses first, then the cross-cell comparisons (budget
    scaling per model, batching efficiency), then chunk mismatches, then failed cells."""
    found: list[Finding] = []
    found.extend(acceptance_collapses(cells))
    found.extend(budget_scalings(cells))
    found.extend(batching_efficiencies(cells))
    found.extend(rank_imbalances(cells))
    found.extend(chunk_accept_mismatches(cells))
    found.extend(cell_failures(cells))
    return found
