"""The Runs detail puts a budget-scaling finding's models side by side: one column per model
(its architecture named), a row per DDTree budget with the accepted tokens per step, then the
trend and each model's best variant; at 80 columns the model columns stay whole.

The summary is the one `campaigns/ddtree-architectures.toml` produced in demo mode (4
requests per level), kept as JSON."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from rich.console import Console

from console.bench.results import RunSummary
from console.bench.tables import SideBySide, scaling_tables, to_markdown
from console.export.snapshot import build_snapshot
from console.export.snapshot import to_markdown as snapshot_markdown
from console.telemetry.store import TimeSeriesStore
from console.tui.widgets.run_tables import side_by_side, summary_view

SUMMARY = Path(__file__).resolve().parent / "fixtures" / "summaries" / "ddtree-architectures.json"


@pytest.mark.parametrize("width", [80, 200])
def test_the_models_stand_side_by_side_in_the_runs_detail(width: int) -> None:
    summary = RunSummary.from_json(json.loads(SUMMARY.read_text()))
    console = Console(width=width, record=True)
    console.print(summary_view(summary, width))
    shown = console.export_text()
    assert "budget scaling at concurrency 1 (accepted tokens per verify step)" in shown
    lines = shown.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("budget scaling at"))
    header, *rows = lines[head + 1 : head + 8]
    assert "qwen3.6-27b tp1 (hybrid-gdn)" in header
    assert "kimi-k2.6 tp8 (attention-mla-moe)" in header
    labels = ("budget 15", "budget 32", "budget 64", "acceptance", "best variant", "best tok/s")
    by_label = {}
    for row in rows:
        label = next(name for name in labels if row.startswith(name))
        by_label[label] = row[len(label) :].split()
    assert by_label["budget 15"] == ["15.1", "6.3"]
    assert by_label["budget 64"] == ["3.9", "8.9"]
    assert by_label["acceptance"] == ["collapses", "rises"]
    assert by_label["best variant"] == ["ddtree-b15", "ddtree-b32"]
    # Several models: the cells' table keeps the profile at any width, and the best per
    # level names its model.
    assert any(line.startswith("kimi-k2.6 ") and " off " in line for line in lines)
    assert "best per level: 1: qwen3.6-27b ddtree-b15 167.8 tok/s" in shown
    assert all(len(line) <= width for line in lines)


def test_summary_md_and_snapshot_md_carry_the_side_by_side_table() -> None:
    summary = RunSummary.from_json(json.loads(SUMMARY.read_text()))
    document = build_snapshot(
        store=TimeSeriesStore(10),
        now_mono=time.monotonic(),
        servers=[],
        topology={"source": "none", "gpus": [], "numa_nodes": []},
        latest_run=summary,
        demo=True,
        source="live",
    )
    for markdown in (snapshot_markdown(document, summary), to_markdown(summary)):
        assert "|  | qwen3.6-27b tp1 (hybrid-gdn) | kimi-k2.6 tp8 (attention-mla-moe) |" in markdown
        assert "| budget 32 | 4.8 | 8.1 |" in markdown
        assert "| acceptance | collapses | rises |" in markdown


def test_a_third_model_is_never_dropped_the_table_turns_instead() -> None:
    summary = RunSummary.from_json(json.loads(SUMMARY.read_text()))
    (side, _) = scaling_tables(summary)
    third = SideBySide(
        side.title,
        (*side.headers, "glm-5 tp8 (attention-moe)"),
        [[*row, row[1]] for row in side.rows],
    )
    console = Console(width=80, record=True)
    console.print(side_by_side(third, 80))
    shown = console.export_text()
    for model in ("qwen3.6-27b tp1 (hybrid-gdn)", "kimi-k2.6 tp8 (attention-mla-moe)", "glm-5"):
        assert model in shown
    assert shown.splitlines()[0].split()[:3] == ["model", "budget", "15"]
    # The latency table of a run of several models names each row's model too.
    console = Console(width=80, record=True)
    console.print(summary_view(summary, 80))
    latency = console.export_text().split("latency (ms)")[1].splitlines()
    assert latency[1].startswith("PROFILE")
    assert any(line.startswith("kimi-k2.6") for line in latency[2:])
