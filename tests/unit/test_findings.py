"""Findings on hand-built level summaries: the collapse on the calibration shape, its silence
when slower steps explain the loss, every threshold just inside and just outside its edge, the
chunk mismatch and failed cells, and the JSON form read back."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from console.bench.findings import (
    AcceptanceCollapse,
    CellFacts,
    CellFailed,
    ChunkAcceptMismatch,
    LevelFacts,
    acceptance_collapses,
    cell_failures,
    chunk_accept_mismatches,
    find_all,
    finding_from_json,
)
from console.bench.results import CellSummary

# The reference box's measured shape (DESIGN.md section 1; issue 19): budget, accepted tokens
# per step, step time derived as accepted / output tok/s.
CALIBRATION = ((15, 15.0, 0.0865), (32, 5.0, 0.054), (64, 4.0, 0.062))


def ddtree(
    budget: int,
    accept: float | None,
    step_s: float | None,
    *,
    concurrency: int = 1,
    layout: str = "tp1",
    architecture: str = "hybrid-gdn",
    algorithm: str = "DDTREE",
) -> CellFacts:
    return CellFacts(
        profile="qwen3.6-27b",
        layout=layout,
        variant=f"ddtree-b{budget}",
        algorithm=algorithm,
        architecture=architecture,
        ddtree_budget=budget,
        levels=(LevelFacts(concurrency=concurrency, accept_length=accept, step_time_s=step_s),),
    )


def sweep(points: tuple[tuple[int, float, float], ...], **kwargs: Any) -> list[CellFacts]:
    return [ddtree(budget, accept, step, **kwargs) for budget, accept, step in points]


def test_collapse_is_found_on_the_calibration_shape() -> None:
    found = acceptance_collapses(sweep(CALIBRATION))
    assert len(found) == 1
    collapse = found[0]
    assert (collapse.profile, collapse.layout, collapse.concurrency) == ("qwen3.6-27b", "tp1", 1)
    assert collapse.cause == "hybrid-gdn-sibling-state"
    assert "(15 -> 32 -> 64)" in collapse.message
    assert "15.0 -> 5.0 -> 4.0" in collapse.message
    assert "(86 -> 54 -> 62 ms)" in collapse.message
    assert "GDN" in collapse.message
    assert "sibling" in collapse.message


def test_collapse_is_not_found_when_the_steps_slow_enough_to_explain_the_loss() -> None:
    slower = ((15, 15.0, 0.0865), (32, 5.0, 0.200), (64, 4.0, 0.260))
    assert acceptance_collapses(sweep(slower)) == []


def test_the_step_edge_is_five_percent_over_the_smallest_budgets_step() -> None:
    inside = ((15, 15.0, 0.100), (32, 5.0, 0.054), (64, 4.0, 0.1049))
    outside = ((15, 15.0, 0.100), (32, 5.0, 0.054), (64, 4.0, 0.1051))
    assert len(acceptance_collapses(sweep(inside))) == 1
    assert acceptance_collapses(sweep(outside)) == []


def test_the_acceptance_edge_is_a_fall_below_85_percent_of_the_smallest_budgets() -> None:
    below = ((15, 10.0, 0.08), (32, 8.49, 0.08))
    above = ((15, 10.0, 0.08), (32, 8.51, 0.08))
    assert len(acceptance_collapses(sweep(below))) == 1
    assert acceptance_collapses(sweep(above)) == []


def test_a_rise_of_up_to_2_percent_between_budgets_still_counts_as_falling() -> None:
    within = ((15, 15.0, 0.08), (32, 5.0, 0.06), (64, 5.09, 0.06))
    beyond = ((15, 15.0, 0.08), (32, 5.0, 0.06), (64, 5.11, 0.06))
    assert len(acceptance_collapses(sweep(within))) == 1
    assert acceptance_collapses(sweep(beyond)) == []


def test_acceptance_growing_with_the_budget_is_no_collapse() -> None:
    # A pure-attention model with an exact tree mask: acceptance rises with the budget.
    growing = ((15, 5.0, 0.06), (32, 6.5, 0.07), (64, 7.2, 0.09))
    assert acceptance_collapses(sweep(growing, architecture="attention-mla-moe")) == []


def test_a_pure_attention_collapse_names_no_hybrid_cause() -> None:
    (collapse,) = acceptance_collapses(sweep(CALIBRATION, architecture="attention-mla-moe"))
    assert collapse.cause is None
    assert "Likely cause" not in collapse.message


def test_collapse_needs_two_budgets_with_acceptance_and_step_time() -> None:
    assert acceptance_collapses([ddtree(15, 15.0, 0.0865)]) == []
    # The middle budget without a step time drops out; the other two still show the collapse.
    cells = [ddtree(15, 15.0, 0.0865), ddtree(32, 5.0, None), ddtree(64, 4.0, 0.062)]
    (collapse,) = acceptance_collapses(cells)
    assert "(15 -> 64)" in collapse.message
    assert acceptance_collapses([ddtree(15, 15.0, 0.0865), ddtree(64, None, 0.062)]) == []


def test_collapse_is_judged_per_layout_and_concurrency_on_ddtree_cells_only() -> None:
    other_layout = ddtree(64, 4.0, 0.062, layout="tp4")
    assert acceptance_collapses([*sweep(CALIBRATION[:2]), other_layout]) != []
    assert acceptance_collapses([ddtree(15, 15.0, 0.0865), other_layout]) == []
    dflash = sweep(CALIBRATION, algorithm="DFLASH")
    assert acceptance_collapses(dflash) == []
    # Concurrency 4 collapses, concurrency 1 does not: one finding, at 4.
    cells = [
        *sweep(((15, 15.0, 0.35), (32, 5.0, 0.32)), concurrency=4),
        *sweep(((15, 15.0, 0.08), (32, 14.8, 0.08)), concurrency=1),
    ]
    assert [c.concurrency for c in acceptance_collapses(cells)] == [4]


def test_budgets_are_ordered_by_size_whatever_the_cell_order() -> None:
    (collapse,) = acceptance_collapses(list(reversed(sweep(CALIBRATION))))
    assert "(15 -> 32 -> 64)" in collapse.message


def mismatch_cell(mismatch: float | None) -> CellFacts:
    level = LevelFacts(
        concurrency=1, accept_length=4.0, tokens_per_chunk=2.0, chunk_accept_mismatch=mismatch
    )
    return CellFacts(profile="qwen3.6-27b", layout="tp1", variant="dflash", levels=(level,))


def test_chunk_mismatch_fires_only_past_15_percent() -> None:
    assert chunk_accept_mismatches([mismatch_cell(None)]) == []
    assert chunk_accept_mismatches([mismatch_cell(0.1499)]) == []
    assert chunk_accept_mismatches([mismatch_cell(0.15)]) == []
    (found,) = chunk_accept_mismatches([mismatch_cell(0.1501)])
    assert found.message == (
        "qwen3.6-27b tp1 dflash: tokens per streamed chunk (2.00) differ from the acceptance "
        "length (4.00) by 15%: check --stream-interval"
    )
    assert found.concurrency == 1


def test_a_failed_cell_is_a_finding_with_its_reason() -> None:
    failed = CellFacts(
        profile="kimi-k2.6", layout="tp8", variant="eagle3", status="failed", reason="OOM"
    )
    done = dataclasses.replace(failed, status="done", reason=None)
    assert cell_failures([done]) == []
    (found,) = cell_failures([failed, done])
    assert found == CellFailed(
        profile="kimi-k2.6",
        layout="tp8",
        variant="eagle3",
        message="kimi-k2.6 tp8 eagle3 failed: OOM",
    )


def test_find_all_orders_collapses_then_mismatches_then_failures() -> None:
    failed = CellFacts(profile="p", layout="l", variant="v", status="failed", reason="x")
    cells = [failed, mismatch_cell(0.5), *sweep(CALIBRATION)]
    kinds = [f.kind for f in find_all(cells)]
    assert kinds == ["acceptance-collapse", "chunk-accept-mismatch", "cell-failed"]


def test_each_finding_reads_back_from_its_json() -> None:
    failed = CellFacts(profile="p", layout="l", variant="v", status="failed", reason="x")
    found = find_all([*sweep(CALIBRATION), mismatch_cell(0.5), failed])
    assert len(found) == 3
    for finding in found:
        data = json.loads(json.dumps(finding.to_json()))
        assert data["kind"] == finding.kind
        assert finding_from_json(data) == finding
    assert list(found[0].to_json()) == [
        "kind",
        "profile",
        "layout",
        "concurrency",
        "message",
        "cause",
    ]
    with pytest.raises(ValueError, match="unknown finding kind 'x'"):
        finding_from_json({"kind": "x"})


def test_a_summary_cells_facts_include_imported_levels_without_step_times() -> None:
    cell = {
        "cell_id": "c1",
        "profile": "qwen3.6-27b",
        "layout": "tp1",
        "variant": "ddtree-b15",
        "algorithm": "DDTREE",
        "architecture": "hybrid-gdn",
        "ddtree_budget": 15,
        "server": "s1",
        "status": "done",
        "reason": None,
        "levels": [
            {"level": 0, "concurrency": 4, "accept_length": 3.2, "accept_length_note": "lifetime"}
        ],
    }
    facts = CellSummary.from_json(cell).facts()
    assert facts.ddtree_budget == 15
    assert facts.levels == (LevelFacts(concurrency=4, accept_length=3.2, requests=0),)
    assert find_all([facts]) == []


def test_inputs_and_findings_are_frozen_and_keyword_only() -> None:
    with pytest.raises(TypeError):
        LevelFacts(1, 2.0)  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        mismatch_cell(0.5).status = "failed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        AcceptanceCollapse("p", "l", 1, "m")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ChunkAcceptMismatch("p", "l", 1, "m")  # type: ignore[call-arg]
