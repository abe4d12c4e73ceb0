"""Run-to-run noise: standard errors by batch means from per-request figures, and the
beyond-noise rule."""

from __future__ import annotations

import math
import random
import shutil
from pathlib import Path

import pytest

from console.bench.compare import NOISE_FLOOR, MetricValues, compare_runs
from console.bench.noise import (
    MIN_BLOCK_REQUESTS,
    MIN_BLOCKS,
    level_errors,
    mean_se,
    quantile_se,
    run_errors,
)
from console.bench.results import LevelSummary, RequestResult

IDENTICAL = Path(__file__).resolve().parent / "fixtures" / "identical-runs"
"""Three runs of one configuration against the simulator (Qwen3.6-27B, --sim-speed 20):
`bench --concurrency 4,8 --requests 48 --input-len 256 --output-len 64` on a busy 2-core
host; the first run's TTFT p50 at concurrency 4 reads about 30% above the other two."""


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
    from console.bench.noise import in_window
    from console.bench.results import LevelRecord, RequestResult
    from console.bench.rundir import RunDir
    from console.bench.summary import load_summary

    shutil.copytree(IDENTICAL / "20261202-032536-noise1", tmp_path / "run")
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
        if level.window != "steady":
            continue
        # Counted by send time in [start, end): requests still running at the window's
        # close are in, a request sent at its close is not.
        record = records[key]
        began, scale = record.started_wall or 0.0, record.time_scale
        sent = [(r.send_wall - began) * scale for r in counted]
        ends = [(r.send_wall - began) * scale + (r.e2e_s or 0.0) for r in counted]
        assert level.window_start_s is not None
        assert level.window_end_s is not None
        assert min(sent) >= level.window_start_s
        assert max(sent) < level.window_end_s
        assert max(ends) > level.window_end_s
    assert "steady" in windows  # some level had a window smaller than all its requests


def _requests(ttfts: list[float]) -> list[RequestResult]:
    """One closed-loop level's requests, one sent every 0.1 s, each with 64 tokens."""
    return [
        RequestResult(send_wall=1000.0 + i / 10, ttft_s=t, e2e_s=t + 6.3, output_tokens=64)
        for i, t in enumerate(ttfts)
    ]


def test_batch_means_see_what_requests_sharing_batches_hide() -> None:
    """Latencies that drift together over the level (a slow phase slows every request in
    flight) get a larger standard error than the very same values in random order, which
    an independent-sample error cannot tell apart (it reads the two the same)."""
    level = LevelSummary(level=0, concurrency=4, output_tok_s=40.0)
    for seed in range(5):
        rng = random.Random(seed)
        drifting = [0.08 + 0.04 * i / 47 + rng.gauss(0, 0.002) for i in range(48)]
        shuffled = drifting[:]
        rng.shuffle(shuffled)
        correlated = level_errors(_requests(drifting), level)
        independent = level_errors(_requests(shuffled), level)
        assert correlated["ttft_p50_s"] > 1.15 * independent["ttft_p50_s"], seed
        assert correlated["output_tok_s"] > 1.4 * independent["output_tok_s"], seed
        # The independent-sample error is the least either reads.
        iid = quantile_se(drifting, 0.5)
        assert iid is not None
        assert independent["ttft_p50_s"] >= iid


def test_a_level_too_short_for_its_blocks_gets_no_verdict() -> None:
    level = LevelSummary(level=0, concurrency=4, output_tok_s=40.0)
    enough = MIN_BLOCKS * MIN_BLOCK_REQUESTS
    ttfts = [0.1 + 0.001 * (i % 7) for i in range(enough)]
    assert level_errors(_requests(ttfts[:-1]), level) == {}
    errors = level_errors(_requests(ttfts), level)
    assert {"output_tok_s", "ttft_p50_s", "e2e_p50_s"} <= set(errors)
    assert "ttft_p99_s" not in errors  # 20 requests cannot bound a p99
    short = MetricValues(name="ttft_p50_s", values=(0.1, 0.2), errors=(None, 0.001))
    assert short.beyond_noise(1) is None


def test_three_identical_runs_are_not_marked(tmp_path) -> None:
    """The recorded runs differ by up to 25% in a TTFT p50 with nothing changed: batch
    means judge that within noise, where independent-request errors marked it."""
    from console.bench.rundir import RunDir
    from console.bench.summary import load_summary

    summaries, errors = [], []
    for source in sorted(IDENTICAL.iterdir()):
        folder = tmp_path / source.name
        shutil.copytree(source, folder)
        summary = load_summary(RunDir(folder))
        summaries.append(summary)
        levels = [(cell.cell_id, level) for cell, level in summary.levels()]
        errors.append(run_errors(folder, levels))
    result = compare_runs(*summaries, errors=errors)
    verdicts = {
        (row.load_label, metric.name): [metric.beyond_noise(i) for i in (1, 2)]
        for row in result.rows
        for metric in row.metrics
    }
    assert not any(v for pair in verdicts.values() for v in pair), verdicts
    ttft = next(r for r in result.rows if r.load_label == "4").metric("ttft_p50_s")
    assert min(ttft.change_pct(1) or 0, ttft.change_pct(2) or 0) < -20
    # Judged, not merely unjudged: the p50s and throughput carry a verdict at both levels.
    for load in ("4", "8"):
        for name in ("output_tok_s", "ttft_p50_s", "itl_p50_s", "e2e_p50_s"):
            assert verdicts[(load, name)] == [False, False], (load, name)
