"""A real benchmark against a dp2 simulator: each level carries per-rank figures from the
rank every request reports (`meta_info["dp_rank"]`, sglang 0.5.23
srt/managers/tokenizer_manager.py:2616-2617), and the `dp-rank-imbalance` finding fires on a
starved or a slow rank, never on a healthy server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console

from console.bench.facts import LevelFacts
from console.bench.rank_facts import RankLevel
from console.bench.rank_findings import DpRankImbalance
from console.bench.rundir import RunDir
from console.bench.summary import load_summary
from console.tui.widgets.run_tables import summary_view
from tests.conftest import REPO
from tests.simproc import QWEN, running_sim

pytestmark = pytest.mark.slow

DP2 = [*QWEN, "--dp-size", "2"]


@dataclass(frozen=True, kw_only=True)
class RankedLevel(LevelFacts):
    dp_ranks: tuple[RankLevel, ...] = ()


def _dd(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "console", *args, "--demo"],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("DDCONSOLE_SIM_")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _bench(url: str, out: Path) -> dict:
    load = ("--concurrency", "8", "--requests", "16", "--output-len", "64")
    summary: dict = json.loads(_dd("bench", "--url", url, *load, "--json", "--out", str(out)))
    return summary


def _findings(summary: dict) -> list[DpRankImbalance]:
    """The run's dp-rank-imbalance findings, as its summary.json lists them."""
    return [
        DpRankImbalance.from_json(f)
        for f in summary["findings"]
        if f["kind"] == DpRankImbalance.kind
    ]


def _run(fault: str | None, tmp_path: Path) -> tuple[dict, list[DpRankImbalance]]:
    args = [*DP2, "--sim-fault", fault] if fault else DP2
    with running_sim(args, tmp_path, speed=20) as sim:
        summary = _bench(sim.url, tmp_path / "runs")
    return summary, _findings(summary)


def test_healthy_dp2_levels_split_evenly_and_fire_nothing(tmp_path: Path):
    summary, found = _run(None, tmp_path)
    (level,) = summary["cells"][0]["levels"]
    ranks = level["dp_ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [r["requests"] for r in ranks] == [8, 8]
    assert sum(r["output_tokens"] for r in ranks) == level["output_tokens"]
    assert found == []


def test_a_starved_rank_fires_the_finding(tmp_path: Path):
    summary, found = _run("dp-starve:1", tmp_path)
    (level,) = summary["cells"][0]["levels"]
    assert [(r["rank"], r["requests"]) for r in level["dp_ranks"]] == [(0, 16), (1, 0)]
    (finding,) = found
    assert (finding.rank, finding.problem) == (1, "starves")


def test_a_slow_rank_fires_the_finding(tmp_path: Path):
    summary, found = _run("dp-slow:1", tmp_path)
    (level,) = summary["cells"][0]["levels"]
    assert [r["requests"] for r in level["dp_ranks"]] == [8, 8]
    (finding,) = found
    assert (finding.rank, finding.problem) == (1, "lags")
    # `runs show`: the per-rank lines in text, the same figures in JSON.
    run_id, out = summary["run_id"], str(tmp_path / "runs")
    text = _dd("runs", "show", run_id, "--out", out)
    assert "per DP rank" in text
    (line,) = [ln for ln in text.splitlines() if "concurrency 8: dp0 8 req" in ln]
    assert "; dp1 8 req" in line
    shown = json.loads(_dd("runs", "show", run_id, "--json", "--out", out))
    assert shown["cells"][0]["levels"][0]["dp_ranks"] == level["dp_ranks"]
    # The Runs screen's detail pane renders the same lines.
    console = Console(width=160, record=True)
    console.print(summary_view(load_summary(RunDir.open(Path(out), run_id)), 160))
    detail = console.export_text()
    assert "per DP rank" in detail
    assert "dp1 8 req" in detail
    assert finding.request_tok_s is not None
    assert finding.best_request_tok_s is not None
    assert finding.request_tok_s < finding.best_request_tok_s / 2
