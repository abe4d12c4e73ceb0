"""Run-to-run noise: standard errors from per-request figures, and the beyond-noise rule."""

from __future__ import annotations

import math
import random

import pytest

from console.bench.compare import NOISE_FLOOR, MetricValues
from console.bench.noise import mean_se, quantile_se


def test_mean_se_is_the_sample_sd_over_root_n() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    sd = math.sqrt(sum((v - 2.5) ** 2 for v in values) / 3)
    assert mean_se(values) == pytest.approx(sd / 2)
    assert mean_se([5.0]) is None


def test_quantile_se_tracks_the_spread_and_refuses_a_p99_of_few_requests() -> None:
    rng = random.Random(7)
    narrow = [rng.gauss(100.0, 1.0) for _ in range(400)]
    wide = [rng.gauss(100.0, 10.0) for _ in range(400)]
    se_narrow, se_wide = quantile_se(narrow, 0.5), quantile_se(wide, 0.5)
    assert se_narrow is not None
    assert se_wide is not None
    assert se_wide == pytest.approx(10 * se_narrow, rel=0.35)
    # The median's standard error of a normal sample: 1.2533 sd / sqrt(n).
    assert se_wide == pytest.approx(1.2533 * 10 / 20, rel=0.3)
    assert quantile_se(wide[:8], 0.99) is None  # 8 requests cannot pin a p99
    assert quantile_se(wide[:8], 0.5) is not None


def test_a_change_is_beyond_noise_only_past_both_the_errors_and_the_floor() -> None:
    # 10% apart with small errors: beyond noise, and better for a throughput.
    tok_s = MetricValues(name="output_tok_s", values=(100.0, 110.0), errors=(1.0, 1.0))
    assert tok_s.beyond_noise(1) is True
    assert tok_s.better(1) is True
    # The same change within 2 combined standard errors: noise.
    noisy = MetricValues(name="output_tok_s", values=(100.0, 110.0), errors=(5.0, 5.0))
    assert noisy.beyond_noise(1) is False
    # Tiny errors, but under the floor: noise.
    small = 100.0 * (1 + NOISE_FLOOR / 2)
    floor = MetricValues(name="ttft_p50_s", values=(100.0, small), errors=(0.01, 0.01))
    assert floor.beyond_noise(1) is False
    # A slower TTFT is worse; an unknown error gives no verdict.
    slower = MetricValues(name="ttft_p50_s", values=(0.1, 0.2), errors=(0.001, 0.001))
    assert slower.beyond_noise(1) is True
    assert slower.better(1) is False
    unknown = MetricValues(name="ttft_p99_s", values=(0.1, 0.2), errors=(None, 0.001))
    assert unknown.beyond_noise(1) is None
    # A third run compares with the first, and the two-run view stays the first pair.
    three = MetricValues(name="output_tok_s", values=(100.0, 100.5, 90.0), errors=(1, 1, 1))
    assert [three.beyond_noise(i) for i in (1, 2)] == [False, True]
    assert three.delta_pct == pytest.approx(0.5)
    assert three.change_pct(2) == pytest.approx(-10.0)


def test_the_noise_counts_the_requests_the_summary_counts(tmp_path) -> None:
    """A level with a steady window: the standard errors come from the requests inside it,
    as many as the summary's statistics count."""
    import shutil
    from pathlib import Path

    from console.bench.noise import in_window
    from console.bench.results import LevelRecord, RequestResult
    from console.bench.rundir import RunDir
    from console.bench.summary import load_summary

    fixture = Path(__file__).resolve().parent.parent / "tui" / "fixtures" / "runs"
    shutil.copytree(fixture / "20261129-185811-qwen-ddtree-budgets", tmp_path / "run")
    run = RunDir(tmp_path / "run")
    summary = load_summary(run)
    records = {
        (r.cell, r.level): r for r in map(LevelRecord.from_json, run.read_jsonl("levels.jsonl"))
    }
    requests: dict[tuple[str, int], list[RequestResult]] = {}
    for line in run.read_jsonl("requests.jsonl"):
        requests.setdefault((line["cell"], line["level"]), []).append(RequestResult.from_json(line))
    windows = set()
    for cell, level in summary.levels():
        key = (cell.cell_id, level.level)
        counted = [r for r in in_window(requests[key], level, records[key]) if not r.error]
        assert len(counted) == level.counted_requests, key
        windows.add(level.window)
    assert "steady" in windows  # some level had a window smaller than all its requests
