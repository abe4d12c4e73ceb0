"""The Bench screen with a fleet whose other host cannot be reached, fed a reading as
`ddconsole --demo metrics --json` prints it: alpha's ready server is a target led by its
host, alpha's runs are a note saying why they cannot be listed (its runs as last read
marked stale under it, `x` on a finished one refused, its levels a reason), a campaign key
with alpha's server highlighted says campaigns run here only, and `g` on it asks with the
command run there, then reports the failed start with the command to run by hand."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from textual.coordinate import Coordinate
from textual.widgets import DataTable, OptionList, Static

from console.bench.listing import list_runs
from console.cli.services import Services
from console.fleet.fleet import Fleet
from console.fleet.hosts import LOCAL_HOST, Host
from console.tui.app import ConsoleApp
from console.tui.screens import bench_remote
from console.tui.screens.bench import BenchScreen
from console.tui.screens.modals import ConfirmScreen
from tests.tui.conftest import settle, until
from tests.unit.test_remote_rows import READY, reading

TARGET = f"remote:alpha/{READY['id']}"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "runs"


def _keys(table: DataTable[object]) -> list[str]:
    return [
        str(table.coordinate_to_cell_key(Coordinate(i, 0)).row_key.value)
        for i in range(table.row_count)
    ]


@contextmanager
def refused_port() -> Iterator[int]:
    """A port that refuses connections while held: bound here and never listening, so no
    other test (xdist worker) can be given it and answer there."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def unreachable_alpha(port: int) -> Fleet:
    """A fleet whose alpha gave a reading (as `ddconsole --demo metrics --json` prints it,
    with one ready server) but whose SSH port refuses."""
    fleet = Fleet([LOCAL_HOST, Host("alpha", f"tester@127.0.0.1:{port}")])
    assert fleet._take(fleet._hosts["alpha"], json.dumps(reading()))
    return fleet


async def test_another_hosts_target_and_runs_without_a_link(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with refused_port() as port:
        await _without_a_link(monkeypatch, unreachable_alpha(port))


async def _without_a_link(monkeypatch: pytest.MonkeyPatch, fleet: Fleet) -> None:
    # alpha answers its reading but nothing else. Its first listing is its only one: rows
    # set below are not replaced by a later one.
    monkeypatch.setattr(bench_remote, "REMOTE_EVERY_S", 3600.0)
    backend = Services.create(demo=True).live_backend(recordings=None)
    backend.fleet = fleet
    app = ConsoleApp(backend, mode="bench")
    notes: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **_: notes.append(str(message)))
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, BenchScreen)
            targets = screen.query_one("#targets", OptionList)
            options = [targets.get_option_at_index(i) for i in range(targets.option_count)]
            assert [str(o.prompt) for o in options] == [
                "local  none ready: s, then n to launch",
                f"alpha  {READY['id']}  off  :39925",
            ]
            assert options[1].id == TARGET
            assert targets.highlighted == 1  # the one that can be benchmarked

            table = screen.query_one("#recent", DataTable)
            await until(pilot, lambda: "alpha//error" in _keys(table), 30, "alpha's note")
            assert [str(c.label) for c in table.ordered_columns][:2] == ["HOST", "RUN"]
            row = [str(getattr(c, "plain", c)) for c in table.get_row_at(0)]
            assert row[0] == "alpha"
            assert row[1].startswith("alpha: stale: cannot connect to "), row

            # Runs listed before alpha went: kept under its note, marked, not followed.
            kept = list_runs(FIXTURES)[-1]
            screen.remote["alpha"] = replace(screen.remote["alpha"], rows=(kept,))
            screen._show_runs(screen.runs, force=True)
            key = f"alpha/{kept.run_id}"
            assert _keys(table) == ["alpha//error", key]
            cells = [str(getattr(c, "plain", c)) for c in table.get_row_at(1)]
            assert cells[:4] == ["alpha", kept.run_id, "done (stale)", "2/2"], cells
            table.move_cursor(row=1)
            table.focus()

            def levels() -> str:
                console = Console(width=200, record=True)
                console.print(screen.query_one("#levels-text", Static).content)
                return console.export_text()

            reason = f"alpha: {kept.run_id}: stale: cannot connect to "
            await until(pilot, lambda: levels().startswith(reason), 30, "why no levels")
            await pilot.press("x")
            assert f"run {kept.run_id} on alpha is done: nothing to stop" in notes
            targets.focus()

            await pilot.press("D")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 30, "the ask")
            confirm = app.screen
            assert isinstance(confirm, ConfirmScreen)
            assert confirm.detail.startswith(
                "Campaigns run on this host only (not on alpha, whose server is highlighted); "
                "to run one there: ddconsole --demo --host alpha campaign FILE.toml --detach\n"
            ), confirm.detail
            await pilot.press("n")

            await pilot.press("g")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 30, "the ask")
            confirm = app.screen
            assert isinstance(confirm, ConfirmScreen)
            assert confirm.title_text == f"Benchmark {READY['id']} on alpha?"
            assert (
                "It runs detached on alpha: ddconsole --demo --host alpha bench "
                f"--server={READY['id']}" in confirm.detail
            ), confirm.detail
            await pilot.press("y")
            await until(pilot, lambda: any("not started" in n for n in notes), 30, "the failure")
            failed = next(n for n in notes if "not started" in n)
            assert failed.startswith("benchmark on alpha not started: stale: cannot connect")
            assert "by hand: ddconsole --host alpha bench --server=" in failed
    finally:
        await fleet.stop()
