"""One damaged run (a requests.jsonl that is a folder, a run.json that is not an object) is
an "unreadable: REASON" row or summary in the CLI and on the Runs and Bench screens; the
other runs are still listed and the app keeps running."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable, Static

from console.bench.listing import DiskRuns
from console.bench.summary import UnreadableRun
from console.cli.services import Services
from console.tui.app import ConsoleApp
from console.tui.screens.bench import BenchScreen
from console.tui.screens.runs import RunsScreen
from tests.conftest import CliResult
from tests.tui.conftest import settle, until
from tests.tui.test_bench_summary_cache import DiskBackend

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "runs"
GOOD = "20261129-185811-qwen-ddtree-budgets"
DAMAGED = "20261129-185848-qwen-b15-recheck"


def damaged_runs(root: Path) -> Path:
    """Two fixture runs; the newer one's requests.jsonl replaced by a folder."""
    root.mkdir(parents=True, exist_ok=True)
    for run_id in (GOOD, DAMAGED):
        shutil.copytree(FIXTURES / run_id, root / run_id)
    requests = root / DAMAGED / "requests.jsonl"
    requests.unlink()
    requests.mkdir()
    (root / DAMAGED / "summary.json").unlink()  # stale: it has to be rebuilt, and cannot
    return root


def text_of(widget: Static) -> str:
    console = Console(width=200, record=True)
    console.print(widget.content)
    return console.export_text()


def test_disk_runs_say_why_a_run_is_unreadable(tmp_path: Path) -> None:
    runs = DiskRuns(damaged_runs(tmp_path / "runs"))
    assert [r.run_id for r in runs.runs()] == [GOOD, DAMAGED]
    with pytest.raises(UnreadableRun) as caught:
        runs.run_summary(DAMAGED)
    assert "requests.jsonl" in caught.value.message
    assert caught.value.reason.endswith("Is a directory")
    summary = runs.run_summary(GOOD)
    assert summary is not None
    assert summary.run_id == GOOD


def test_runs_show_and_list_on_an_unreadable_run(cli: Callable[..., CliResult]) -> None:
    root = damaged_runs(Services.create(demo=True).state.runs)
    shown = cli("runs", "show", DAMAGED, "--demo")
    assert shown.code == 1
    assert "Traceback" not in shown.err
    assert "internal error" not in shown.err
    assert f"run {DAMAGED} is unreadable" in shown.err
    assert "requests.jsonl: Is a directory" in shown.err
    listed = cli("runs", "list", "--demo")
    assert listed.code == 0, listed.err
    assert DAMAGED in listed.out
    assert GOOD in listed.out
    assert (root / GOOD / "run.json").is_file()


def test_a_run_json_that_is_not_an_object_is_listed_as_unreadable(
    cli: Callable[..., CliResult],
) -> None:
    root = damaged_runs(Services.create(demo=True).state.runs)
    (root / DAMAGED / "run.json").write_text(json.dumps([1, 2, 3]))
    listed = cli("runs", "list", "--demo")
    assert listed.code == 0, listed.err
    assert "internal error" not in listed.err
    line = next(line for line in listed.out.splitlines() if DAMAGED in line)
    assert "unreadable" in line
    assert "run.json" in line
    assert GOOD in listed.out
    shown = cli("runs", "show", DAMAGED, "--demo")
    assert shown.code == 1
    assert "unreadable" in shown.err
    assert "Traceback" not in shown.err
    as_json = json.loads(cli("runs", "list", "--demo", "--json").out)
    assert [r["status"] for r in as_json] == ["done", "unreadable"]


async def test_the_runs_screen_shows_an_unreadable_run_and_carries_on(tmp_path: Path) -> None:
    backend = DiskBackend(damaged_runs(tmp_path / "runs"))
    app = ConsoleApp(backend, mode="runs")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        table = screen.query_one("#runs", DataTable)
        await until(pilot, lambda: table.row_count == 2, what="both runs listed")
        detail = screen.query_one("#detail-text", Static)
        # Newest first: the damaged run is selected first.
        await until(pilot, lambda: "is unreadable" in text_of(detail), what="the reason shown")
        assert "Is a directory" in text_of(detail)
        await pilot.press("down")
        await until(pilot, lambda: GOOD in text_of(detail), what="the good run's summary")
        await pilot.press("up")
        await until(pilot, lambda: "is unreadable" in text_of(detail), what="the reason again")
        await settle(pilot)
        assert app.is_running
        assert app.return_code is None


async def test_the_bench_screen_shows_an_unreadable_run_and_carries_on(tmp_path: Path) -> None:
    backend = DiskBackend(damaged_runs(tmp_path / "runs"))
    app = ConsoleApp(backend, mode="bench", refresh_s=0.1)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, BenchScreen)
        levels = screen.query_one("#levels-text", Static)
        await until(pilot, lambda: "is unreadable" in text_of(levels), what="the reason shown")
        await settle(pilot)
        assert app.is_running
        assert app.return_code is None


async def test_the_runs_list_carries_a_run_json_that_is_not_an_object(tmp_path: Path) -> None:
    root = damaged_runs(tmp_path / "runs")
    (root / DAMAGED / "run.json").write_text(json.dumps([1, 2, 3]))
    backend = DiskBackend(root)
    app = ConsoleApp(backend, mode="runs")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        table = screen.query_one("#runs", DataTable)
        await until(pilot, lambda: table.row_count == 2, what="both runs listed")
        status = str(table.get_row_at(0)[2])
        assert status.startswith("unreadable: ")
        assert "not a JSON object but an array" in status
        detail = screen.query_one("#detail-text", Static)
        await until(pilot, lambda: "unreadable" in text_of(detail), what="the reason shown")
        await pilot.press("down")
        await until(pilot, lambda: GOOD in text_of(detail), what="the good run's summary")
        assert app.is_running
