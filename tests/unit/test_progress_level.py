"""A running level's progress: what the tracker counts, what progress.json holds, and what a
run's listing row exposes as `RunRow.level`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from console.bench.levels import LevelSpec
from console.bench.listing import LevelProgress, Progress, RunRow, run_row
from console.bench.live_progress import LevelTracker
from console.bench.results import RequestResult
from console.bench.rundir import RunDir
from console.bench.runmeta import RunMeta


def result(send: float, tokens: int = 100, error: str | None = None) -> RequestResult:
    return RequestResult(
        send_wall=send,
        ttft_s=0.05,
        itl_s=0.01,
        output_tokens=None if error else tokens,
        error=error,
    )


def tracker(spec: LevelSpec, *, scale: float = 1.0) -> LevelTracker:
    base = Progress(cell="p/tp1/off", level=spec.index, done=0, planned=spec.requests or 0)
    return LevelTracker(base, spec, levels=3, time_scale=scale, now=1000.0)


def test_counts_errors_tok_s_and_eta_at_the_pace_so_far() -> None:
    level = tracker(LevelSpec(1, 4, None, 12, None))
    for _ in range(3):
        level.add(result(1000.0))
    level.add(result(1001.0, error="HTTP 500"))
    live = level.live(now=1010.0)
    assert (live.index, live.of, live.concurrency, live.label) == (1, 3, 4, "concurrency 4")
    assert (live.completed, live.total, live.errors) == (4, 12, 1)
    # 300 tokens from the three good requests over 10 s since the first send.
    assert live.output_tok_s == pytest.approx(30.0)
    # 8 left at 4 per 10 s.
    assert live.eta_s == pytest.approx(20.0)
    assert live.elapsed_s == pytest.approx(10.0)


def test_tok_s_is_on_the_server_clock_and_eta_in_real_seconds() -> None:
    level = tracker(LevelSpec(0, 1, None, 4, None), scale=5.0)
    level.add(result(1000.0))
    live = level.live(now=1002.0)
    assert live.output_tok_s == pytest.approx(100 / (2.0 * 5.0))
    assert live.eta_s == pytest.approx(6.0)


def test_nothing_estimated_before_the_first_request_ends() -> None:
    live = tracker(LevelSpec(0, 1, None, 4, None)).live(now=1003.0)
    assert (live.completed, live.output_tok_s, live.eta_s) == (0, None, None)


def test_a_timed_level_counts_down_its_duration() -> None:
    level = tracker(LevelSpec(0, 2, None, None, 60.0), scale=2.0)
    level.add(result(1000.0))
    live = level.live(now=1010.0)
    assert live.total is None
    assert live.eta_s == pytest.approx(60.0 / 2.0 - 10.0)


def test_progress_carries_the_level_and_reads_back(tmp_path: Path) -> None:
    level = tracker(LevelSpec(2, None, 1.5, 10, None))
    level.add(result(1000.0))
    progress = level.progress(now=1001.0)
    assert progress.done == 1
    assert progress.ttft_p50_s == pytest.approx(0.05)
    assert progress.live is not None
    assert progress.live.label == "rate 1.5/s"
    read = Progress.from_json(json.loads(json.dumps(progress.to_json())))
    assert read == progress


def test_a_running_rows_level_comes_from_progress_json(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "live", RunMeta(kind="bench"))
    run.claim()  # this process is its live owner
    run.update_meta(lambda meta: replace(meta, status="running"))
    live = LevelProgress(
        index=0,
        of=2,
        concurrency=4,
        rate=None,
        completed=5,
        total=16,
        errors=1,
        output_tok_s=123.4,
        elapsed_s=3.0,
        eta_s=7.5,
    )
    progress = Progress(cell="c", level=0, done=5, planned=16, live=live)
    (run.path / "progress.json").write_text(json.dumps(progress.to_json()))
    row = run_row(run.path)
    assert row.status == "running"
    assert row.level == live
    # The row's JSON (recordings, `runs list --json`) keeps it.
    assert RunRow.from_json(row.to_json()).level == live
    run.release()
    assert run_row(run.path).level is None


def test_an_older_progress_file_has_no_level() -> None:
    old = {"cell": "c", "level": 0, "done": 3, "planned": 8}
    progress = Progress.from_json(old)
    assert progress is not None
    assert progress.live is None
    assert LevelProgress.from_json({"index": "x"}) is None
