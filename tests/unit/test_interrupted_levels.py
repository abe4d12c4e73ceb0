"""A level cut short (its server stopped by the user, or the run stopped) is no result: it
gets no speedup, is no best level and no finding rests on it (issue 18; a trial saw an
acceptance-collapse finding and a 1.34x speedup built on one request of an interrupted cell)."""

from __future__ import annotations

from console.bench.findings import find_all
from console.bench.results import CellSummary, LevelSummary
from console.bench.summary import _with_speedups, best_per_level


def cell(
    variant: str, budget: int | None, tok_s: float, accept: float, step_s: float, status: str
) -> CellSummary:
    return CellSummary(
        cell_id=f"qwen3.6-27b/tp1/{variant}",
        profile="qwen3.6-27b",
        layout="tp1",
        variant=variant,
        algorithm="DDTREE" if budget else None,
        architecture="hybrid-gdn",
        ddtree_budget=budget,
        status=status,
        levels=(
            LevelSummary(
                level=0,
                concurrency=1,
                status=status,
                requests=1 if status == "interrupted" else 4,
                output_tok_s=tok_s,
                accept_length=accept if budget else None,
                step_time_s=step_s,
            ),
        ),
    )


def sweep(b32_status: str) -> tuple[CellSummary, ...]:
    return _with_speedups(
        [
            cell("off", None, 26.7, 1.0, 0.037, "done"),
            cell("ddtree-b15", 15, 133.4, 12.8, 0.087, "done"),
            cell("ddtree-b32", 32, 35.7, 4.9, 0.080, b32_status),
        ]
    )


def test_an_interrupted_level_is_not_scored() -> None:
    finished = sweep("done")
    assert finished[2].levels[0].speedup_vs_off is not None
    assert [f.kind for f in find_all([c.facts() for c in finished])] == ["acceptance-collapse"]
    cut_short = sweep("interrupted")
    assert cut_short[2].levels[0].speedup_vs_off is None
    assert cut_short[1].levels[0].speedup_vs_off is not None
    assert find_all([c.facts() for c in cut_short]) == []
    assert all(best.variant != "ddtree-b32" for best in best_per_level(cut_short))
    # Its measured figures stay on its row, marked by its status.
    assert cut_short[2].levels[0].output_tok_s == 35.7
