"""The run estimate a confirmation shows: counts always, a duration where speeds are known.

The simulator figures are its catalog's (console/sim/catalog.toml: Qwen3.6-27B TP1
`ref_step_ms = 37.45`, `batch_alpha = 0.8`); the new-user trial measured the TUI's old demo
defaults (1,4,16 x 32 requests, 512/256) at about 14 minutes against that server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from console.bench.estimate import (
    CellSpeed,
    Estimate,
    about,
    estimate_bench,
    estimate_campaign,
    request_seconds,
)
from console.bench.request import BenchRequest, CampaignRequest
from console.bench.shipped import campaign_files
from console.profiles.loader import ProfileCatalog
from console.tui.sim_speed import sim_cell_speed

QWEN_OFF = CellSpeed(step_s=0.03745, batch_alpha=0.8, tokens_per_step=1.0)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (10, "under a minute"),
        (61, "about 1 min"),
        (40 * 60 + 20, "about 40 min"),
        (150 * 60, "about 2.5 h"),
    ],
)
def test_about_rounds_to_minutes(seconds: float, text: str) -> None:
    assert about(seconds) == text


def test_a_request_is_its_steps_at_the_running_batch() -> None:
    # 256 tokens at one per step, 37.45 ms a step alone and 1+0.8*3 times that at four.
    assert request_seconds(QWEN_OFF, 1, 512, 256) == pytest.approx(256 * 0.03745)
    assert request_seconds(QWEN_OFF, 4, 512, 256) == pytest.approx(256 * 0.03745 * 3.4)
    faster = CellSpeed(step_s=0.087, batch_alpha=1.0, tokens_per_step=15.0)
    assert request_seconds(faster, 1, 512, 256) == pytest.approx(18 * 0.087)


def test_the_old_demo_defaults_come_out_at_the_trials_14_minutes() -> None:
    request = BenchRequest(server_id="s", concurrency=(1, 4, 16), requests=32)
    estimate = estimate_bench(request, QWEN_OFF)
    assert estimate.seconds is not None
    assert 12 * 60 < estimate.seconds < 16 * 60
    assert estimate.describe() == "3 levels × 32 requests, about 14 min"


def test_without_a_speed_the_counts_stand_alone() -> None:
    estimate = estimate_bench(BenchRequest(server_id="s", concurrency=(1, 4), requests=8), None)
    assert estimate == Estimate(1, 2, 16, None)
    assert estimate.describe().startswith("2 levels × 8 requests; duration unknown")


def test_a_campaign_counts_cells_and_each_cells_launch() -> None:
    cells = (("qwen3.6-27b", "tp1", "off"), ("qwen3.6-27b", "tp1", "ddtree-b15"))
    request = CampaignRequest.from_cells(cells, concurrency=(1, 4), requests=16)
    launch = CellSpeed(step_s=0.03745, batch_alpha=0.8, ready_s=100.0)
    estimate = estimate_campaign(request, lambda cell: launch)
    alone = estimate_campaign(request, lambda cell: QWEN_OFF)
    assert (estimate.cells, estimate.levels, estimate.requests) == (2, 2, 64)
    assert estimate.seconds == pytest.approx((alone.seconds or 0) + 200.0)
    assert estimate.describe().startswith("2 cells × 2 levels × 16 requests, about ")
    unknown = estimate_campaign(request, lambda cell: None if cell[2] == "off" else launch)
    assert unknown.seconds is None


def test_the_simulators_speed_follows_its_catalog_and_speed_factor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog = ProfileCatalog()
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "1")
    speed = sim_cell_speed(catalog, ("qwen3.6-27b", "tp1", "off"))
    assert speed is not None
    assert speed.step_s == pytest.approx(0.03745)
    assert speed.tokens_per_step == 1.0
    ddtree = sim_cell_speed(catalog, ("qwen3.6-27b", "tp1", "ddtree-b15"))
    assert ddtree is not None
    assert ddtree.tokens_per_step > 10
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    fast = sim_cell_speed(catalog, ("qwen3.6-27b", "tp1", "off"))
    assert fast is not None
    assert fast.step_s == pytest.approx(0.03745 / 20)
    assert sim_cell_speed(catalog, ("qwen3.6-27b", "tp9", "off")) is None


def test_the_demo_sweep_file_is_estimated_in_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "1")
    catalog = ProfileCatalog()
    path = next(p for p in campaign_files() if p.name == "qwen-ddtree-budgets.toml")
    estimate = estimate_campaign(
        CampaignRequest.from_file(Path(path)), lambda cell: sim_cell_speed(catalog, cell)
    )
    assert estimate.cells == 5  # off, the chain baseline and three budgets
    assert estimate.seconds is not None
    assert 60 < estimate.seconds < 30 * 60


def test_a_finished_runs_levels_give_the_cells_speed() -> None:
    from console.bench.estimate import measured_speed
    from console.bench.results import CellSummary, LevelSummary

    cell = CellSummary(
        cell_id="qwen3.6-27b/tp1/off",
        profile="qwen3.6-27b",
        layout="tp1",
        variant="off",
        levels=(
            LevelSummary(level=0, concurrency=1, step_time_s=0.0375, accepted_tokens_per_step=1.0),
            LevelSummary(level=1, concurrency=4, step_time_s=0.1275, accepted_tokens_per_step=1.0),
        ),
    )
    speed = measured_speed(cell)
    assert speed is not None
    assert speed.step_s == pytest.approx(0.0375)
    assert speed.batch_alpha == pytest.approx(0.8)
    request = BenchRequest(server_id="s", concurrency=(1, 4, 16), requests=32)
    assert estimate_bench(request, speed).describe() == "3 levels × 32 requests, about 14 min"
    one = CellSummary(cell_id="x", levels=(LevelSummary(level=0, concurrency=1, step_time_s=0.05),))
    alone = measured_speed(one)
    assert alone is not None
    assert alone.batch_alpha == 1.0  # one concurrency measured: no batching gain assumed
    failed = CellSummary(
        cell_id="x", levels=(LevelSummary(level=0, concurrency=1, status="failed"),)
    )
    assert measured_speed(failed) is None
