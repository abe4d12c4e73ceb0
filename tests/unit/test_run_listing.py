"""The runs listing reuses ended runs' rows, and never a stale one."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from console.bench.listing import list_runs
from console.bench.rundir import RunDir
from console.bench.runmeta import RunMeta


def test_an_ended_run_is_reread_only_when_its_metadata_changes(tmp_path: Path):
    run = RunDir.create(tmp_path, "sweep", RunMeta(kind="campaign", status="done"))
    first = list_runs(tmp_path)
    assert [r.status for r in first] == ["done"]
    again = list_runs(tmp_path)
    assert again[0] is first[0]  # unchanged run.json: the row is reused, not re-read

    run.update_meta(lambda meta: replace(meta, status="failed"))
    stat = (run.path / "run.json").stat()
    # Same size and an mtime that may not have ticked: force a visible change.
    os.utime(run.path / "run.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert [r.status for r in list_runs(tmp_path)] == ["failed"]


def test_running_and_created_runs_are_always_reread(tmp_path: Path):
    RunDir.create(tmp_path, "bench", RunMeta(kind="bench", status="created"))
    first = list_runs(tmp_path)
    second = list_runs(tmp_path)
    assert first[0].status == "created"
    assert second[0] is not first[0]


def test_a_running_runs_progress_says_when_it_was_updated(tmp_path: Path):
    """`runs list --json` carries progress.json's `updated_wall` (how fresh the count is)."""
    run = RunDir.create(tmp_path, "sweep", RunMeta(kind="campaign", status="running"))
    run.claim()  # owned by this live process: the run is running, not interrupted
    run.write_text(
        "progress.json",
        '{"cell": "c", "level": 1, "done": 3, "planned": 8, "updated_wall": 1795978721.5}',
    )
    row = list_runs(tmp_path)[0].to_json()
    assert row["status"] == "running"
    assert row["progress"] == {
        "cell": "c",
        "level": 1,
        "done": 3,
        "planned": 8,
        "updated_wall": 1795978721.5,
        "server": None,
        "ttft_p50_s": None,
        "ttft_p99_s": None,
        "itl_p50_s": None,
        "itl_p99_s": None,
        "level_progress": None,
        "phase": None,
        "run_eta_s": None,
        "correct_drafts_histogram": None,
    }
