"""`summary.json` is the cache of record: read while newer than every file it is built from,
rebuilt (and rewritten) when one is newer, when it is damaged, or of another version."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from console.bench.listing import DiskRuns
from console.bench.results import RunSummary
from console.bench.rundir import RunDir
from console.bench.summary import load_summary

RUNS = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "runs"
RUN_ID = "20261129-185811-qwen-ddtree-budgets"
SOURCES = ("run.json", "levels.jsonl", "requests.jsonl", "telemetry.jsonl", "progress.json")


@pytest.fixture
def run(tmp_path: Path) -> RunDir:
    """A copy of a fixture run without its summary files."""
    copy = tmp_path / RUN_ID
    copy.mkdir()
    for name in SOURCES:
        shutil.copy2(RUNS / RUN_ID / name, copy / name)
    return RunDir(copy)


def age(path: Path, seconds: float) -> None:
    """Move a file's mtime `seconds` into the past (or the future, when negative)."""
    stat = path.stat()
    shift = int(seconds * 1e9)
    os.utime(path, ns=(stat.st_atime_ns - shift, stat.st_mtime_ns - shift))


def forge(run: RunDir, name: str) -> None:
    """Replace summary.json by one with another run name, newer than every source."""
    path = run.path / "summary.json"
    data = json.loads(path.read_text())
    data["name"] = name
    path.write_text(json.dumps(data))
    age(path, -10)


def test_the_first_load_writes_the_summary_files_and_later_ones_read_them(run: RunDir) -> None:
    first = load_summary(run)
    assert (run.path / "summary.json").is_file()
    assert (run.path / "summary.csv").is_file()
    assert (run.path / "summary.md").is_file()
    written = (run.path / "summary.json").stat().st_mtime_ns
    second = load_summary(run)
    assert second is first  # nothing moved: the same object, no file read
    assert (run.path / "summary.json").stat().st_mtime_ns == written
    # A newer summary.json is served as it is: it is read, not recomputed.
    forge(run, "as cached")
    assert load_summary(run).name == "as cached"
    assert load_summary(run).run_dir == str(run.path)


def test_a_source_newer_than_the_summary_rebuilds_it(run: RunDir) -> None:
    load_summary(run)
    forge(run, "stale")
    levels = run.path / "levels.jsonl"
    levels.write_text(levels.read_text())  # rewritten: newer than the summary now
    age(levels, -20)
    rebuilt = load_summary(run)
    assert rebuilt.name == "qwen-ddtree-budgets"
    assert json.loads((run.path / "summary.json").read_text())["name"] == "qwen-ddtree-budgets"


def test_new_telemetry_rebuilds_the_summary(run: RunDir) -> None:
    load_summary(run)
    forge(run, "stale")
    (run.path / "telemetry-1.ddrec.gz").write_bytes(b"")
    age(run.path / "telemetry-1.ddrec.gz", -20)
    assert load_summary(run).name == "qwen-ddtree-budgets"


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps({"schema_version": RunSummary.SCHEMA_VERSION + 1, "run_id": "x"}),
        json.dumps({"schema_version": RunSummary.SCHEMA_VERSION, "cells": "many"}),
    ],
    ids=["damaged", "another-version", "another-shape"],
)
def test_a_damaged_or_foreign_summary_is_rebuilt_never_trusted(run: RunDir, content: str) -> None:
    path = run.path / "summary.json"
    path.write_text(content)
    age(path, -10)
    summary = load_summary(run)
    assert summary.name == "qwen-ddtree-budgets"
    assert len(summary.cells) == 4
    assert json.loads(path.read_text())["schema_version"] == RunSummary.SCHEMA_VERSION


def test_a_running_summary_whose_campaign_died_reads_as_interrupted(run: RunDir) -> None:
    run.update_meta(
        lambda meta: replace(meta, status="running")
    )  # and no owner.json: nobody runs it
    load_summary(run)
    forge(run, "cached while running")
    data = json.loads((run.path / "summary.json").read_text())
    data["status"] = "running"
    (run.path / "summary.json").write_text(json.dumps(data))
    age(run.path / "summary.json", -30)
    assert load_summary(run).status == "interrupted"


def test_disk_runs_serve_rows_and_summaries(run: RunDir) -> None:
    runs = DiskRuns(run.path.parent)
    assert [r.run_id for r in runs.runs()] == [RUN_ID]
    summary = runs.run_summary(RUN_ID)
    assert summary is not None
    assert summary.run_id == RUN_ID
    assert runs.run_summary("../etc") is None
    assert runs.run_summary("no-such-run") is None
    assert runs.run_summary(RUN_ID) is summary  # read once, then served from memory
