"""Golden test: rebuilding the fixture runs' summaries gives byte-identical `summary.json`.

The fixture runs under tests/tui/fixtures/runs/ hold the `summary.json` the code wrote when
they were recorded; any change to level summaries, findings or the JSON layout shows up here
as a diff (an intended one goes with a new `schema_version`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from console.bench.rundir import RunDir
from console.bench.summary import write_summaries

RUNS = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "runs"
SOURCES = ("run.json", "levels.jsonl", "requests.jsonl", "telemetry.jsonl", "progress.json")


@pytest.mark.parametrize("run_id", sorted(p.name for p in RUNS.iterdir() if p.is_dir()))
def test_fixture_run_summary_json_is_byte_identical(run_id: str, tmp_path: Path) -> None:
    recorded = RUNS / run_id
    copy = tmp_path / run_id
    copy.mkdir()
    for name in SOURCES:
        if (recorded / name).exists():
            shutil.copy2(recorded / name, copy / name)
    write_summaries(RunDir(copy))
    expected = (recorded / "summary.json").read_text()
    # The one field that names where the run lies differs by location only.
    recorded_dir = json.loads(expected)["run_dir"]
    produced = (copy / "summary.json").read_text()
    produced = produced.replace(json.dumps(str(copy)), json.dumps(recorded_dir), 1)
    assert produced == expected


def test_the_fixtures_hold_findings_of_every_shape_they_cover() -> None:
    """The golden runs exercise the collapse finding (two concurrencies) and batching
    efficiency (both runs)."""
    counts = sorted(
        len(json.loads((p / "summary.json").read_text())["findings"])
        for p in RUNS.iterdir()
        if p.is_dir()
    )
    assert counts == [1, 3]
