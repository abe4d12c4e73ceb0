"""The Bench screen says what a run waits for between levels (its server's launch) and the
whole run's ETA beside the level's (issue 18)."""

from __future__ import annotations

from console.bench.listing import LevelProgress, Progress
from console.tui.screens.bench import _now_line, _progress_text

CELL = "qwen3.6-27b/tp1/ddtree-b15"


def test_a_launch_shows_its_milestone_and_the_run_eta() -> None:
    launching = Progress(
        cell=CELL,
        level=None,
        done=0,
        planned=0,
        phase="launching qwen3.6-27b-tp1-2: weights loaded (1.9 s)",
        run_eta_s=95.0,
    )
    assert _progress_text(launching, None) == (
        "ddtree-b15 launching qwen3.6-27b-tp1-2: weights loaded (1.9 s) · run ETA 1m35s"
    )
    assert _now_line(launching, None).startswith(f"now: {CELL} launching qwen3.6-27b-tp1-2")


def test_a_level_shows_the_run_eta_only_when_more_follows() -> None:
    level = LevelProgress(
        index=0, of=1, concurrency=1, rate=None, completed=2, total=4, errors=0,
        output_tok_s=120.0, elapsed_s=5.0, eta_s=5.0,
    )  # fmt: skip
    more = Progress(cell=CELL, level=0, done=2, planned=4, live=level, run_eta_s=40.0)
    assert _progress_text(more, level).endswith("ETA 5s · run ETA 40s")
    assert _now_line(more, level).endswith("elapsed · run ETA 40s")
    last = Progress(cell=CELL, level=0, done=2, planned=4, live=level, run_eta_s=5.5)
    assert "run ETA" not in _progress_text(last, level)
