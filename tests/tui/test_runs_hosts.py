"""The Runs screen for other hosts: row keys that tell a host's runs and notes apart from
this host's runs, the notes a host's listing adds (not read yet, failed, older runs not
listed), a stale host's runs marked and kept under its note, and a detail read for a row
the cursor has left never shown."""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Static

from console.bench.listing import list_runs
from console.bench.results import RunSummary
from console.bench.rundir import RunDir
from console.bench.summary import load_summary
from console.cli.services import Services
from console.core.net import free_port
from console.fleet.fleet import Fleet
from console.fleet.hosts import LOCAL_HOST, Host
from console.fleet.remote_runs import HostRuns, row_stamp
from console.tui.app import ConsoleApp
from console.tui.screens.runs import (
    NOTE,
    RunsScreen,
    host_notes,
    remote_key,
    split_key,
    stale_line,
    stale_status,
)
from console.tui.widgets.finder import Cell
from tests.tui.conftest import settle, until

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "runs"
OLDER, NEWER = "20261129-185811-qwen-ddtree-budgets", "20261129-185848-qwen-b15-recheck"


def test_row_keys_tell_hosts_and_notes_apart():
    assert split_key(NEWER) == (None, NEWER)
    assert split_key(remote_key("alpha", NEWER)) == ("alpha", NEWER)
    assert host_notes(None, "alpha") == [
        ("alpha//pending", "alpha: reading its runs…", "alpha: reading its runs…")
    ]
    newest = list_runs(FIXTURES)[-1]
    assert newest.run_id == NEWER
    runs = HostRuns("alpha", (newest,), more=1, skipped=0, error="stale: connection refused")
    notes = host_notes(runs, "alpha")
    assert [split_key(key) for key, _, _ in notes] == [("alpha", "/error"), ("alpha", "/more")]
    assert notes[0][1] == "alpha: stale: connection refused"
    assert "as last read" in notes[0][2]
    assert notes[1][1] == "alpha: 1 older runs not listed"
    assert "ddconsole --host alpha runs list" in notes[1][2]
    # Entries that were not runs get a row; a good listing adds none.
    skipped = host_notes(replace(runs, error=None, more=0, skipped=2), "alpha")
    assert [text for _, text, _ in skipped] == [
        "alpha: 2 entries of its listing were not runs (skipped)"
    ]
    assert host_notes(HostRuns("alpha", (newest,)), "alpha") == []


def test_a_stale_hosts_detail_says_why_and_how_old():
    newest = list_runs(FIXTURES)[-1]
    current = HostRuns("alpha", (newest,), listed_wall=1000.0)
    assert stale_line(current, "alpha", 1120.0) is None
    assert stale_line(None, "alpha", 1120.0) is None
    stale = replace(current, error="stale: connection lost")
    assert stale_line(stale, "alpha", 1120.0) == (
        "alpha is stale: connection lost; this run is as last read, 2m00s ago"
    )
    never = HostRuns("alpha", error="stale: connection refused")
    assert stale_line(never, "alpha", 1120.0) == (
        "alpha is stale: connection refused; this run is as last read"
    )
    assert stale_status("running") == "running (stale)"
    # Read again at another time, the same runs are the same listing.
    assert current.same_rows(replace(current, listed_wall=2000.0))
    assert not current.same_rows(stale)


def _copy_runs(services: Services) -> None:
    services.state.runs.mkdir(parents=True, exist_ok=True)
    for run in (OLDER, NEWER):
        shutil.copytree(FIXTURES / run, services.state.runs / run)


def _rows(table: DataTable[Cell]) -> list[tuple[str, list[Cell]]]:
    keys = [
        str(table.coordinate_to_cell_key(Coordinate(i, 0)).row_key.value)
        for i in range(table.row_count)
    ]
    return [(key, list(table.get_row_at(i))) for i, key in enumerate(keys)]


def _detail(screen: RunsScreen) -> str:
    console = Console(width=200, record=True)
    console.print(screen.query_one("#detail-text", Static).content)
    return console.export_text()


async def test_a_late_detail_is_dropped_once_its_row_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A summary read slowly for the row the cursor has left never replaces the detail of
    the row it is on now."""
    services = Services.create(demo=True)
    _copy_runs(services)
    backend = services.live_backend(recordings=None)
    gate = threading.Event()
    read = backend.run_summary

    def slow(run_id: str) -> RunSummary | None:
        if run_id == NEWER:
            gate.wait(30)  # a large run's summary being rebuilt
        return read(run_id)

    monkeypatch.setattr(backend, "run_summary", slow)
    app = ConsoleApp(backend, mode="runs")
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        table = screen.query_one("#runs", DataTable)
        await until(pilot, lambda: table.row_count == 2, what="both runs listed")
        assert screen.selected_id() == NEWER  # its summary is being read, slowly
        table.move_cursor(row=1)
        await until(pilot, lambda: screen.shown == OLDER, what="the older run's detail")
        gate.set()  # the newer run's read ends, its row no longer selected
        await settle(pilot)
        assert screen.shown == OLDER
        assert screen.summary is not None
        assert screen.summary.run_id == OLDER
        assert NEWER not in _detail(screen)


async def test_a_host_whose_listing_fails_keeps_its_runs_dimmed_under_its_note(
    tmp_path: Path,
) -> None:
    """alpha listed once, then unreachable: its runs stay, marked stale and dimmed, under
    its note whatever the sort, and a run's detail says alpha is stale and since when."""
    services = Services.create(demo=True)
    backend = services.live_backend(recordings=None)
    # A fleet whose alpha is behind a closed port: every listing of it fails at once.
    backend.fleet = Fleet(
        [LOCAL_HOST, Host("alpha", f"tester@127.0.0.1:{free_port()}")], connect_timeout_s=5
    )
    root = tmp_path / "alpha-runs"
    shutil.copytree(FIXTURES, root)
    older, newer = list_runs(root)
    running = replace(newer, status="running", cells_done=3, cells=10)
    app = ConsoleApp(backend, mode="runs")
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            screen = app.screen
            assert isinstance(screen, RunsScreen)
            await until(pilot, lambda: "alpha" in screen.remote, what="alpha's first listing")
            # Its last good listing, two minutes old; then ctrl+r lists it again, and fails.
            good = HostRuns("alpha", (running, older), listed_wall=time.time() - 120)
            screen.remote["alpha"] = good
            await pilot.press("ctrl+r")
            await until(
                pilot,
                lambda: (
                    screen.remote["alpha"].error is not None
                    and screen.remote["alpha"].rows == good.rows
                ),
                what="alpha's listing failed, its runs kept",
            )
            screen._fill()
            table = screen.query_one("#runs", DataTable)
            rows = dict(_rows(table))
            run_row = rows[remote_key("alpha", running.run_id)]
            assert [str(getattr(c, "plain", c)) for c in run_row][3:] == [
                "running (stale)",
                "3/10",
            ]
            assert all(isinstance(c, Text) and c.style == "dim" for c in run_row)
            # Sorted by STATUS either way, the note still leads alpha's runs.
            note = f"alpha{NOTE}error"
            group = [note, remote_key("alpha", running.run_id), remote_key("alpha", older.run_id)]
            for descending in (False, True):
                screen.finder.column, screen.finder.descending = "STATUS", descending
                screen.apply_find()
                keys = [key for key, _ in _rows(table)]
                assert keys[keys.index(note) : keys.index(note) + 3] == group, keys
            # Its summary as read before alpha went stale: shown, saying so.
            summary = load_summary(RunDir(root / running.run_id))
            screen._summaries.put("alpha", running.run_id, row_stamp(running), summary)
            table.move_cursor(row=keys.index(remote_key("alpha", running.run_id)))
            await until(pilot, lambda: "on host alpha" in _detail(screen), what="the detail")
            text = " ".join(_detail(screen).split())
            assert "alpha is stale: cannot connect to " in text, text
            assert "this run is as last read, 2m" in text, text
    finally:
        await backend.fleet.stop()
