"""The Runs detail of a run follows its files: a run that finishes while its detail is open
flips from running to its final status within a couple of list refreshes (issue 16)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from rich.console import Console
from textual.widgets import Static

from console.bench.rundir import RunDir
from console.cli.services import Services
from console.tui.app import ConsoleApp
from console.tui.screens.runs import LIST_EVERY_S, RunsScreen
from tests.tui.conftest import settle, until

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "runs"
RUN = "20261129-185848-qwen-b15-recheck"


def detail_text(screen: RunsScreen) -> str:
    console = Console(width=200, record=True)
    console.print(screen.query_one("#detail-text", Static).content)
    return console.export_text()


def set_status(meta_path: Path, status: str) -> None:
    meta = json.loads(meta_path.read_text())
    meta["status"] = status
    if status == "running":
        meta["pid"] = os.getpid()
        meta.pop("ended_wall", None)
    meta_path.write_text(json.dumps(meta))


async def test_a_run_that_finishes_while_its_detail_is_open_shows_as_done(
    tmp_path: Path,
) -> None:
    services = Services.create(demo=True)
    services.state.runs.mkdir(parents=True, exist_ok=True)
    run = services.state.runs / RUN
    shutil.copytree(FIXTURES / RUN, run)
    set_status(run / "run.json", "running")
    owner = RunDir(run)
    owner.claim()  # this process owns it, as a campaign does: listed as running
    (run / "summary.json").unlink()  # rebuilt from the run's files, as running
    backend = services.live_backend(recordings=None)
    app = ConsoleApp(backend, mode="runs")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        await until(pilot, lambda: screen.shown == RUN, what="the run's detail")
        await until(
            pilot,
            lambda: screen.summary is not None and screen.summary.status == "running",
            what="the detail of the running run",
        )
        assert "running" in detail_text(screen)
        # The run ends on disk as a campaign ends it: released, then its run.json says so.
        owner.release()
        set_status(run / "run.json", "done")
        await until(
            pilot,
            lambda: screen.summary is not None and screen.summary.status == "done",
            timeout=10 * LIST_EVERY_S,
            what="the detail to show the run done",
        )
        await settle(pilot)
        assert "running" not in detail_text(screen)
