"""A run's acceptance distribution leaves the console: `summary.md`, and `snapshot.json` /
`snapshot.md` for the latest run, on a run recorded from the simulator (DDTree budgets 15, 32
and 64 on Qwen3.6-27B)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from console.bench.listing import DiskRuns
from console.bench.results import RunSummary
from console.bench.tables import acceptance_lines, to_markdown
from console.export.snapshot import build_snapshot
from console.export.snapshot import to_markdown as snapshot_markdown
from console.telemetry.store import TimeSeriesStore

FIXTURES = Path(__file__).resolve().parents[1] / "tui" / "fixtures"
RUN = "20261202-003643-qwen-accept-hist"


def recorded_run(tmp_path: Path) -> RunSummary:
    shutil.copytree(FIXTURES / "accept_hist_runs" / RUN, tmp_path / RUN)
    summary = DiskRuns(tmp_path).run_summary(RUN)
    assert summary is not None
    return summary


def test_each_level_gets_a_line_with_its_drop_and_shares(tmp_path: Path) -> None:
    summary = recorded_run(tmp_path)
    lines = acceptance_lines(summary)
    assert len(lines) == 6
    b32 = next(lv for c, lv in summary.levels() if c.variant == "ddtree-b32")
    histogram = b32.correct_drafts_histogram
    assert histogram is not None
    steps = sum(histogram)
    shares = " ".join(f"{k}:{n / steps:.0%}" for k, n in enumerate(histogram))
    expected = (
        f"qwen3.6-27b tp1 ddtree-b32, concurrency 1: drop at draft "
        f"{b32.accept_drop_position}; {shares}"
    )
    assert expected in lines
    # Budget 15 never accepted fewer than 12 drafts: the empty counts fold into one.
    assert any(
        line.startswith("qwen3.6-27b tp1 ddtree-b15") and "0-11:0%" in line for line in lines
    )
    markdown = to_markdown(summary)
    assert "## Acceptance distribution" in markdown
    assert f"- {expected}" in markdown


def test_a_run_without_histograms_adds_no_section(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "runs" / "20261129-185848-qwen-b15-recheck", tmp_path / "r")
    summary = DiskRuns(tmp_path).run_summary("r")
    assert summary is not None
    assert acceptance_lines(summary) == []
    assert "Acceptance distribution" not in to_markdown(summary)


def test_the_snapshot_carries_the_latest_runs_distribution(tmp_path: Path) -> None:
    summary = recorded_run(tmp_path)
    document = build_snapshot(
        store=TimeSeriesStore(10),
        now_mono=time.monotonic(),
        servers=[],
        topology={"source": "none", "gpus": [], "numa_nodes": []},
        latest_run=summary,
        demo=True,
        source="live",
    )
    levels = json.loads(json.dumps(document))["latest_run"]["cells"][1]["levels"]
    assert levels[0]["correct_drafts_histogram"] == list(
        summary.cells[1].levels[0].correct_drafts_histogram or ()
    )
    assert levels[0]["accept_drop_position"] == summary.cells[1].levels[0].accept_drop_position
    markdown = snapshot_markdown(document, summary)
    for line in acceptance_lines(summary):
        assert f"- {line}" in markdown
