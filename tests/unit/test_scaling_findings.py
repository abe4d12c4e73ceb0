"""The cross-cell findings on hand-built level summaries: budget scaling on the two shipped
models' shapes (Qwen3.6-27B's measured collapse, Kimi K2.6's rise on pure attention), its
silence with one model, the trend edges; batching efficiency on Kimi's near-linear and
Qwen's near-flat sweeps, a level of fewer requests than its concurrency, open-loop levels
left out; both read back from their JSON."""

from __future__ import annotations

import json

import pytest

from console.bench.facts import CellFacts, LevelFacts
from console.bench.findings import find_all, finding_from_json
from console.bench.scaling import (
    BatchingEfficiency,
    BudgetScaling,
    batching_efficiencies,
    budget_scalings,
    trend,
)

# (budget, accepted tokens per step, output tok/s): Qwen3.6-27B TP1 as measured on the
# reference box; Kimi K2.6 TP8 as the simulator's catalog chose it.
QWEN = ((15, 15.09, 173.4), (32, 5.0, 92.0), (64, 4.0, 64.3))
KIMI = ((15, 6.6, 89.0), (32, 8.2, 97.6), (64, 9.0, 80.4))


def cell(
    profile: str,
    layout: str,
    variant: str,
    architecture: str,
    levels: tuple[LevelFacts, ...],
    budget: int | None = None,
) -> CellFacts:
    return CellFacts(
        profile=profile,
        layout=layout,
        variant=variant,
        algorithm="DDTREE" if budget else "off",
        architecture=architecture,
        ddtree_budget=budget,
        levels=levels,
    )


def model(
    profile: str,
    layout: str,
    architecture: str,
    points: tuple[tuple[int, float, float], ...],
    off_tok_s: float,
    concurrency: int = 1,
) -> list[CellFacts]:
    cells = [
        cell(
            profile,
            layout,
            "off",
            architecture,
            (LevelFacts(concurrency=concurrency, output_tok_s=off_tok_s, requests=16),),
        )
    ]
    for budget, accept, tok_s in points:
        level = LevelFacts(
            concurrency=concurrency,
            accept_length=accept,
            step_time_s=accept / tok_s,  # one stream: a step commits `accept` tokens
            output_tok_s=tok_s,
            requests=16,
        )
        cells.append(cell(profile, layout, f"ddtree-b{budget}", architecture, (level,), budget))
    return cells


def both() -> list[CellFacts]:
    return [
        *model("qwen3.6-27b", "tp1", "hybrid-gdn", QWEN, 26.7),
        *model("kimi-k2.6", "tp8", "attention-mla-moe", KIMI, 27.0),
    ]


def test_budget_scaling_contrasts_the_collapse_with_the_rise_and_names_the_best() -> None:
    (found,) = budget_scalings(both())
    assert found.concurrency == 1
    qwen, kimi = found.models
    assert (qwen.profile, qwen.trend, qwen.budgets) == ("qwen3.6-27b", "collapses", (15, 32, 64))
    assert qwen.accept_lengths == (15.09, 5.0, 4.0)
    assert (qwen.best_variant, qwen.best_tok_s) == ("ddtree-b15", 173.4)
    assert qwen.best_speedup == pytest.approx(173.4 / 26.7)
    assert (kimi.profile, kimi.trend) == ("kimi-k2.6", "rises")
    assert kimi.architecture == "attention-mla-moe"
    assert (kimi.best_variant, kimi.best_tok_s) == ("ddtree-b32", 97.6)
    assert "acceptance collapses on qwen3.6-27b tp1 (hybrid-gdn" in found.message
    assert "15.1 -> 5.0 -> 4.0" in found.message
    assert "acceptance rises on kimi-k2.6 tp8 (attention-mla-moe" in found.message
    assert "6.6 -> 8.2 -> 9.0" in found.message
    assert "qwen3.6-27b ddtree-b15 (173 tok/s, 6.5x off)" in found.message
    assert "kimi-k2.6 ddtree-b32 (98 tok/s, 3.6x off)" in found.message


def test_budget_scaling_needs_two_models_each_with_two_budgets() -> None:
    assert budget_scalings(model("qwen3.6-27b", "tp1", "hybrid-gdn", QWEN, 26.7)) == []
    one_budget = model("kimi-k2.6", "tp8", "attention-mla-moe", KIMI[:1], 27.0)
    assert budget_scalings([*model("q", "tp1", "hybrid-gdn", QWEN, 26.7), *one_budget]) == []
    # Two models, but at different concurrencies: nothing to compare.
    apart = [
        *model("q", "tp1", "hybrid-gdn", QWEN, 26.7, concurrency=1),
        *model("k", "tp8", "attention-mla-moe", KIMI, 27.0, concurrency=8),
    ]
    assert budget_scalings(apart) == []


@pytest.mark.parametrize(
    ("accepts", "expected"),
    [
        ((15.0, 5.0, 4.0), "collapses"),
        ((10.0, 8.49), "collapses"),
        ((10.0, 8.51), "falls"),
        ((15.0, 5.0, 5.11), "mixed"),  # a rise past the 2% noise after the fall
        ((15.0, 5.0, 5.09), "collapses"),
        ((6.6, 8.2, 9.0), "rises"),
        ((8.0, 7.9, 8.1), "holds"),  # within 2% at each step, under 5% overall
        ((8.0, 8.0, 8.39), "holds"),
        ((8.0, 8.0, 8.41), "rises"),
    ],
)
def test_trend_edges(accepts: tuple[float, ...], expected: str) -> None:
    assert trend(accepts) == expected


def sweep_cell(profile: str, layout: str, rates: dict[int, float], requests: int = 64) -> CellFacts:
    levels = tuple(
        LevelFacts(concurrency=c, output_tok_s=tok_s, requests=requests)
        for c, tok_s in rates.items()
    )
    return cell(profile, layout, "off", "any", levels)


def test_batching_efficiency_tells_near_linear_from_near_flat() -> None:
    kimi = sweep_cell("kimi-k2.6", "tp8", {1: 25.6, 8: 202.0, 32: 807.5})
    qwen = sweep_cell("qwen3.6-27b", "tp1", {1: 26.7, 32: 33.0})
    (found,) = batching_efficiencies([kimi, qwen])
    assert found.concurrency == 32
    by_profile = {c.profile: c for c in found.cells}
    assert by_profile["kimi-k2.6"].efficiency == pytest.approx(807.5 / (32 * 25.6))
    assert by_profile["kimi-k2.6"].verdict == "near-linear"
    assert by_profile["qwen3.6-27b"].verdict == "near-flat"
    assert "kimi-k2.6 tp8 off 0.99, near-linear (808 tok/s against 25.6 single)" in found.message
    partial = sweep_cell("p", "tp2", {1: 20.0, 4: 40.0})
    assert batching_efficiencies([partial])[0].cells[0].verdict == "partial"
    # Judged on the gain over a flat server, whatever N: a flat pair of streams scores 0.5
    # of linear but gained nothing; 64 streams at 0.4 of linear gained 25x.
    flat_pair = sweep_cell("p", "tp1", {1: 20.0, 2: 20.0})
    assert batching_efficiencies([flat_pair])[0].cells[0].verdict == "near-flat"
    wide = sweep_cell("p", "tp8", {1: 10.0, 64: 0.4 * 64 * 10.0})
    assert batching_efficiencies([wide])[0].cells[0].verdict == "partial"


def test_batching_counts_the_requests_in_flight_and_skips_open_loop_levels() -> None:
    # 4 requests at concurrency 8: only 4 were ever in flight, so 4 x single is the bar.
    short = sweep_cell("k", "tp8", {1: 27.0, 8: 107.0}, requests=4)
    (found,) = batching_efficiencies([short])
    assert found.concurrency == 4
    assert found.cells[0].verdict == "near-linear"
    assert found.cells[0].concurrency == 8
    assert "with 4 requests in flight (concurrency 8, fewer requests than that)" in found.message
    open_loop = cell(
        "k",
        "tp8",
        "off",
        "any",
        (
            LevelFacts(concurrency=1, output_tok_s=27.0, requests=16),
            LevelFacts(concurrency=64, rate=2.0, output_tok_s=300.0, requests=16),
        ),
    )
    assert batching_efficiencies([open_loop]) == []
    assert batching_efficiencies([sweep_cell("k", "tp8", {8: 200.0})]) == []  # no single


def test_both_read_back_from_their_json_in_find_alls_order() -> None:
    found = find_all([*both(), sweep_cell("kimi-k2.6", "tp8", {1: 25.6, 32: 807.5})])
    kinds = [f.kind for f in found]
    assert kinds == ["acceptance-collapse", "budget-scaling", "batching-efficiency"]
    for finding in found:
        data = json.loads(json.dumps(finding.to_json()))
        assert finding_from_json(data) == finding
    scaling = next(f for f in found if isinstance(f, BudgetScaling))
    assert list(scaling.to_json()) == ["kind", "concurrency", "models", "message"]
    batching = next(f for f in found if isinstance(f, BatchingEfficiency))
    assert list(batching.to_json()["cells"][0]) == [
        "profile",
        "layout",
        "variant",
        "single_tok_s",
        "tok_s",
        "efficiency",
        "verdict",
        "concurrency",
    ]


def tree_cell(
    algorithm: str, flag: str, budget: int, accept: float, step_s: float, profile: str = "q"
) -> CellFacts:
    return CellFacts(
        profile=profile,
        layout="tp1",
        variant=f"{algorithm.lower()}-t{budget}",
        algorithm=algorithm,
        architecture="hybrid-gdn",
        ddtree_budget=budget if algorithm == "DDTREE" else None,
        tree_budget=budget,
        tree_flag=flag,
        levels=(
            LevelFacts(
                concurrency=1,
                accept_length=accept,
                step_time_s=step_s,
                output_tok_s=accept / step_s,
                requests=16,
            ),
        ),
    )


def test_another_tree_algorithm_is_judged_like_ddtree_and_apart_from_it() -> None:
    """A DFLASH tree-width sweep (an open SGLang pull request's flag, named in the profile)
    collapses and scales as DDTree's budgets do, each algorithm on its own."""
    width = "--speculative-dflash-tree-width"
    dflash = [tree_cell("DFLASH", width, w, a, 0.06) for w, a in ((2, 6.0), (4, 4.0), (8, 3.0))]
    ddtree = [
        tree_cell("DDTREE", "--speculative-ddtree-budget", b, a, s)
        for b, a, s in ((15, 15.0, 0.0865), (32, 5.0, 0.054), (64, 4.0, 0.062))
    ]
    found = find_all([*dflash, *ddtree])
    collapses = [f for f in found if f.kind == "acceptance-collapse"]
    assert len(collapses) == 2
    messages = " | ".join(f.message for f in collapses)
    assert messages.count("the DDTree budget grows (15 -> 32 -> 64)") == 1
    assert messages.count(f"the DFLASH tree budget ({width}) grows (2 -> 4 -> 8)") == 1
    kimi = [
        tree_cell("DFLASH", width, w, a, 0.07, profile="k")
        for w, a in ((2, 5.0), (4, 6.0), (8, 6.5))
    ]
    (scaling,) = budget_scalings([*dflash, *kimi])
    assert [(m.profile, m.algorithm, m.tree_flag, m.trend) for m in scaling.models] == [
        ("q", "DFLASH", width, "collapses"),
        ("k", "DFLASH", width, "rises"),
    ]
    assert f"DFLASH tree budget ({width})s 2 -> 4 -> 8" in scaling.message
    assert finding_from_json(json.loads(json.dumps(scaling.to_json()))) == scaling


def test_a_server_given_by_url_is_named_as_the_server() -> None:
    levels = (
        LevelFacts(concurrency=1, output_tok_s=25.8, requests=24),
        LevelFacts(concurrency=8, output_tok_s=31.0, requests=24),
    )
    (found,) = batching_efficiencies(
        [CellFacts(profile=None, layout=None, variant=None, levels=levels)]
    )
    assert "None" not in found.message
    assert "the server 0.15, near-flat" in found.message
