"""Bench (and Runs) with another host whose answers are hostile or slow: non-finite numbers
in its `runs list --json` are unknown, not a crash; an error in one listing is a notice;
the selected remote run's levels load while the host's listing keeps changing; a remote
start or stop that fails unexpectedly says so, and q asks while one runs; a run started
there is selected as soon as it is listed."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import DataTable, OptionList, Static

from console.bench.listing import DiskRuns, LevelProgress, Progress, RunRow, list_runs
from console.bench.request import BenchRequest
from console.bench.results import RunSummary
from console.cli.services import Services
from console.fleet import remote_bench
from console.fleet.fleet import Fleet
from console.fleet.remote_bench import RemoteStart
from console.fleet.remote_runs import HostRuns, parse_run_list
from console.tui.app import ConsoleApp
from console.tui.remote_calls import remote_calls
from console.tui.run_rows_format import progress_text, status_text
from console.tui.screens import bench_remote, runs
from console.tui.screens.bench import BenchScreen
from console.tui.screens.modals import ConfirmScreen
from tests.tui.conftest import until
from tests.tui.test_bench_hosts import FIXTURES, TARGET, _keys, refused_port, unreachable_alpha
from tests.unit.test_remote_rows import READY

DONE = list_runs(FIXTURES)[-1]
RUNNING = "20261206-080000-bench-qwen3.6-27b-tp1-1"


def _running(updated_wall: float) -> RunRow:
    """A run in its level on alpha, as its listing says it (its mark moves as it runs)."""
    level = LevelProgress(
        index=0, of=1, concurrency=1, rate=None, completed=3, total=8, errors=0,
        output_tok_s=40.0, elapsed_s=12.0, eta_s=20.0,
    )  # fmt: skip
    progress = Progress(
        cell="qwen3.6-27b/tp1/ddtree-b15", level=0, done=3, planned=8,
        updated_wall=updated_wall, live=level,
    )  # fmt: skip
    return replace(DONE, run_id=RUNNING, status="running", cells_done=0, cells=1, progress=progress)


def test_non_finite_numbers_from_another_host_read_as_unknown() -> None:
    row = _running(1.0).to_json()
    text = json.dumps([row]).replace('"eta_s": 20.0', '"eta_s": 1e999')
    text = text.replace('"updated_wall": 1.0', '"updated_wall": NaN')
    text = text.replace('"run_eta_s": null', '"run_eta_s": Infinity')
    (parsed,), _, _ = parse_run_list(text)
    assert parsed.level is not None
    assert parsed.level.eta_s is None
    assert parsed.progress is not None
    assert parsed.progress.updated_wall is None
    assert parsed.progress.run_eta_s is None
    assert progress_text(parsed.progress, parsed.level) == ("ddtree-b15 L1/1 3/8 40.0 tok/s")
    assert status_text(parsed, narrow=True).plain == "▶3/8"


def _notes(app: ConsoleApp, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    notes: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **_: notes.append(str(message)))
    return notes


async def _boom(*_: Any, **__: Any) -> HostRuns:
    raise RuntimeError("boom")


async def test_an_error_in_a_listing_is_a_notice_on_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runs, "fetch_runs", _boom)
    with refused_port() as port:
        fleet = unreachable_alpha(port)
        backend = Services.create(demo=True).live_backend(recordings=None)
        backend.fleet = fleet
        app = ConsoleApp(backend, mode="runs")
        notes = _notes(app, monkeypatch)
        try:
            async with app.run_test(size=(160, 50)) as pilot:
                wanted = "listing the runs on alpha: RuntimeError: boom"
                await until(pilot, lambda: wanted in notes, 30, "the notice")
                assert app.is_running
        finally:
            await fleet.stop()


async def test_remote_levels_calls_and_follow_on_bench(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # alpha's listing changes on every read (a run there is running) and is read every
    # tick; the first one fails unexpectedly.
    monkeypatch.setattr(bench_remote, "REMOTE_TICK_S", 0.1)
    monkeypatch.setattr(bench_remote, "REMOTE_EVERY_S", 0.1)
    monkeypatch.setattr(bench_remote, "REMOTE_RUNNING_EVERY_S", 0.1)
    listings = {"n": 0, "moving": True}

    async def fetch_runs(_: Fleet, host: str, *__: Any, **___: Any) -> HostRuns:
        listings["n"] += 1
        if listings["n"] == 1:
            raise RuntimeError("boom")
        mark = float(listings["n"]) if listings["moving"] else 0.0
        return HostRuns(host, (_running(mark), DONE), listed_wall=time.time())

    # Its summary as alpha's `runs show` gives it (read from a copy: it may be rebuilt).
    shutil.copytree(FIXTURES / DONE.run_id, tmp_path / DONE.run_id)
    summary = DiskRuns(tmp_path).run_summary(DONE.run_id)
    assert summary is not None
    reads: list[str] = []

    async def fetch_summary(_: Fleet, host: str, run_id: str) -> RunSummary:
        reads.append(run_id)
        await asyncio.sleep(1.0)  # longer than ten listings of alpha
        return summary

    monkeypatch.setattr(bench_remote, "fetch_runs", fetch_runs)
    monkeypatch.setattr(bench_remote, "fetch_summary", fetch_summary)
    with refused_port() as port:
        fleet = unreachable_alpha(port)
        backend = Services.create(demo=True).live_backend(recordings=None)
        backend.fleet = fleet
        app = ConsoleApp(backend, mode="bench")
        notes = _notes(app, monkeypatch)
        try:
            async with app.run_test(size=(160, 50)) as pilot:
                await _drive(app, pilot, notes, listings, reads, monkeypatch)
        finally:
            await fleet.stop()


async def _drive(
    app: ConsoleApp,
    pilot: Any,
    notes: list[str],
    listings: dict[str, Any],
    reads: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    screen = app.screen
    assert isinstance(screen, BenchScreen)
    wanted = "listing the runs on alpha: RuntimeError: boom"
    await until(pilot, lambda: wanted in notes, 30, "the failed listing's notice")
    table = screen.query_one("#recent", DataTable)
    done, running = f"alpha/{DONE.run_id}", f"alpha/{RUNNING}"
    await until(pilot, lambda: done in _keys(table), 30, "alpha's runs")

    # The finished run's levels come in, read once, while alpha's listing keeps moving.
    table.move_cursor(row=_keys(table).index(done))
    table.focus()

    def levels() -> str:
        console = Console(width=200, record=True)
        console.print(screen.query_one("#levels-text", Static).content)
        return console.export_text()

    moved_from = listings["n"]
    await until(pilot, lambda: "on host alpha" in levels(), 30, "the remote levels")
    assert DONE.run_id in levels()
    assert listings["n"] > moved_from + 3  # the listing moved while it was read
    assert reads.count(DONE.run_id) == 1  # one read, never cancelled

    # x on the running run: q asks while its `runs stop` there runs; it ends with its
    # answer, said, and q no longer asks.
    release = asyncio.Event()

    async def stop_run(_: Fleet, host: str, run_id: str) -> tuple[bool, str]:
        await release.wait()
        return True, f"{host}: stopped {run_id}"

    monkeypatch.setattr(remote_bench, "stop_run", stop_run)
    # The running run's levels are shown once read, then read again (its row moved).
    before = reads.count(RUNNING)
    table.move_cursor(row=_keys(table).index(running))
    await until(pilot, lambda: "on host alpha" in levels(), 30, "the running run's levels")
    await until(pilot, lambda: reads.count(RUNNING) >= before + 2, 30, "it read again")
    await pilot.press("x")
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 30, "the stop's ask")
    await pilot.press("y")
    await until(pilot, lambda: remote_calls(app).described() != [], 30, "the stop running")
    assert remote_calls(app).described() == [f"runs stop {RUNNING} on alpha"]
    await pilot.press("q")
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 30, "the quit's ask")
    quit_ask = app.screen
    assert isinstance(quit_ask, ConfirmScreen)
    assert f"runs stop {RUNNING} on alpha" in quit_ask.detail
    await pilot.press("n")
    release.set()
    await until(pilot, lambda: f"alpha: stopped {RUNNING}" in notes, 30, "the stop's answer")
    assert remote_calls(app).described() == []

    # g on alpha's server: a start that fails unexpectedly says so (and is no longer
    # running for q); one that starts a listed run selects it at once, with no redraw of
    # the list to come.
    started: list[str] = []

    async def start_bench(_: Fleet, host: str, request: BenchRequest) -> RemoteStart:
        started.append(host)
        if len(started) == 1:
            raise RuntimeError("lost")
        return RemoteStart(True, f"started run {RUNNING}", run_id=RUNNING)

    monkeypatch.setattr(remote_bench, "start_bench", start_bench)
    targets = screen.query_one("#targets", OptionList)
    targets.highlighted = [
        targets.get_option_at_index(i).id for i in range(targets.option_count)
    ].index(TARGET)
    targets.focus()
    await pilot.press("g")
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 30, "the start's ask")
    await pilot.press("y")
    failed = f"benchmark of {READY['id']} on alpha: RuntimeError: lost"
    await until(pilot, lambda: failed in notes, 30, "the failed start")
    assert remote_calls(app).described() == []

    listings["moving"] = False  # the list is drawn no more: the start alone selects
    still = listings["n"]
    await until(pilot, lambda: listings["n"] >= still + 3, 30, "alpha's listing still")
    monkeypatch.setattr(screen, "_load_runs", lambda: None)
    table.move_cursor(row=_keys(table).index(done))
    await pilot.press("g")
    await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 30, "the start's ask")
    await pilot.press("y")
    await until(pilot, lambda: len(started) == 2, 30, "the second start")
    await until(pilot, lambda: screen._selected_run() == running, 30, "the run followed")
