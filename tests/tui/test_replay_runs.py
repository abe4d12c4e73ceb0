"""A replay shows the runs as the recording kept them, not today's results folder: a session
recorded while runs existed still lists them, with their summaries, after the run folders
are gone (and a run changed since shows as it was)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from textual.widgets import DataTable, Static

from console.cli.services import Services
from console.telemetry.recording import SUFFIX, read_recording
from console.tui.app import ConsoleApp
from console.tui.replay import ReplayBackend
from console.tui.screens.runs import RunsScreen
from tests.conftest import CliResult
from tests.tui.conftest import settle, until

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "runs"
BUDGETS = "20261129-185811-qwen-ddtree-budgets"
RECHECK = "20261129-185848-qwen-b15-recheck"


def shown_text(app: ConsoleApp) -> str:
    console = Console(width=200, record=True)
    console.print(app.screen.query_one("#detail-text", Static).content)
    return console.export_text()


async def test_a_replay_shows_the_recorded_runs_after_their_folders_are_gone(
    tmp_path: Path, cli: Callable[..., CliResult]
):
    services = Services.create(demo=True)
    services.state.runs.mkdir(parents=True, exist_ok=True)
    for run_id in (BUDGETS, RECHECK):
        shutil.copytree(FIXTURES / run_id, services.state.runs / run_id)
    live = services.live_backend(recordings=tmp_path / "recordings")
    await live.start()
    try:
        # The first poll lists the runs; each later poll records one ended run's summary.
        for _ in range(100):
            await asyncio.sleep(0.2)
            recorder = live.recorder
            if recorder is not None and {BUDGETS, RECHECK} <= set(recorder._summarized):
                break
        # One more round of polls: concurrent sources stamp a round's frames a few ms out
        # of order, and a replay ends at its last frame.
        await asyncio.sleep(1.5)
    finally:
        await live.stop()
    # Today's folder: one run deleted, the other renamed by a later edit of its run.json.
    shutil.rmtree(services.state.runs / BUDGETS)
    meta = services.state.runs / RECHECK / "run.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "name": "renamed-later"}))

    path = next((tmp_path / "recordings").glob(f"*{SUFFIX}"))
    recording = read_recording(path)
    kinds = [frame.kind for frame in recording.frames]
    assert kinds.count("run_summary") == 2
    replay = ReplayBackend(recording, runs_root=services.state.runs, playing=False)
    assert [row.run_id for row in replay.runs()] == [BUDGETS, RECHECK]
    recorded = replay.run_summary(RECHECK)
    assert recorded is not None
    assert recorded.name == "qwen-b15-recheck"

    app = ConsoleApp(replay, mode="runs")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        table = screen.query_one("#runs", DataTable)
        await until(pilot, lambda: table.row_count == 2, what="the recorded runs listed")
        ids = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert ids == [RECHECK, BUDGETS]  # newest first
        # The deleted run, with its recorded findings.
        table.move_cursor(row=1)
        await until(pilot, lambda: screen.shown == BUDGETS, what="the deleted run's summary")
        await settle(pilot)
        text = shown_text(app)
        assert BUDGETS in text
        assert "acceptance-collapse" in text
        # The changed run shows as it was recorded.
        table.move_cursor(row=0)
        await until(pilot, lambda: screen.shown == RECHECK, what="the changed run's summary")
        await settle(pilot)
        text = shown_text(app)
        assert "qwen-b15-recheck" in text
        assert "renamed-later" not in text

    # A snapshot of the recording reports the newest run as recorded.
    out = tmp_path / "snapshot"
    result = cli(
        "snapshot", "--from-recording", str(path), "--format", "json,md", "--out", str(out)
    )
    assert result.code == 0, result.err
    latest = json.loads((out / "snapshot.json").read_text())["latest_run"]
    assert latest["run_id"] == RECHECK
    assert latest["name"] == "qwen-b15-recheck"
    assert "qwen-b15-recheck" in (out / "snapshot.md").read_text()
