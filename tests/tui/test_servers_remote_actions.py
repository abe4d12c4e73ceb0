"""The Servers screen's keys on another host's rows, over a fleet fed a reading as
`ddconsole --demo metrics --json` prints it: an id that would be an option there (`--all`)
is never sent, and `n` launches on this host whichever row the cursor is on."""

from __future__ import annotations

import json

import pytest
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from console.cli.services import Services
from console.core.net import free_port
from console.fleet.fleet import Fleet
from console.fleet.hosts import LOCAL_HOST, Host
from console.tui.app import ConsoleApp
from console.tui.screens.launch import LaunchScreen
from console.tui.screens.modals import ConfirmScreen
from console.tui.screens.servers import ServersScreen
from tests.tui.conftest import settle, until
from tests.unit.test_remote_rows import READY, reading

BAD = "remote:alpha/--all"
GOOD = f"remote:alpha/{READY['id']}"


def _fleet() -> Fleet:
    """alpha's reading lists a ready server and one whose id is `--all` (a damaged state
    file there); its link is never started, so nothing can be run there."""
    fleet = Fleet([LOCAL_HOST, Host("alpha", f"tester@127.0.0.1:{free_port()}")])
    data = reading()
    data["servers"] = [READY, {**READY, "id": "--all", "url": "http://127.0.0.1:40999"}]
    assert fleet._take(fleet._hosts["alpha"], json.dumps(data))
    return fleet


def _keys(table: DataTable[object]) -> list[str]:
    return [
        str(table.coordinate_to_cell_key(Coordinate(i, 0)).row_key.value)
        for i in range(table.row_count)
    ]


async def test_remote_keys_refuse_a_bad_id_and_launch_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = Services.create(demo=True).live_backend(recordings=None)
    backend.fleet = fleet = _fleet()
    app = ConsoleApp(backend, mode="servers")
    notes: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **_: notes.append(str(message)))
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, ServersScreen)
            table = screen.query_one("#list", DataTable)
            await until(pilot, lambda: BAD in _keys(table), what="alpha's servers listed")
            table.focus()
            for key in ("x", "R", "enter"):
                table.move_cursor(row=_keys(table).index(BAD))
                await pilot.pause()
                await pilot.press(key)
                await pilot.pause()
                assert not isinstance(app.screen, ConfirmScreen), key
            assert "\n".join(notes).count("'--all' is not a server id: nothing is run there") == 3
            # No remote call was started.
            assert [w for w in app.workers if w.group == "remote"] == []

            table.move_cursor(row=_keys(table).index(GOOD))
            await pilot.pause()
            await pilot.press("n")
            await until(
                pilot, lambda: isinstance(app.screen, LaunchScreen), 10, "the launch dialog"
            )
            assert "launching on this host; on alpha: ddconsole --host alpha up" in "\n".join(notes)
    finally:
        await fleet.stop()
