"""The Servers screen's keys on another host's rows, over a fleet fed a reading as
`ddconsole --demo metrics --json` prints it: an id that would be an option there (`--all`)
is never sent, and `n` launches on this host whichever row the cursor is on."""

from __future__ import annotations

import json
import time

import pytest
from textual.coordinate import Coordinate
from textual.widgets import DataTable, RichLog, Static

from console.cli.services import Services
from console.core.net import free_port
from console.fleet.fleet import Fleet
from console.fleet.hosts import LOCAL_HOST, Host
from console.tui.app import ConsoleApp
from console.tui.remote_calls import remote_calls
from console.tui.screens.launch import LaunchScreen
from console.tui.screens.logs import LogsScreen
from console.tui.screens.modals import ConfirmScreen
from console.tui.screens.servers import COLUMNS, ServersScreen
from tests.tui.conftest import settle, until
from tests.unit.test_remote_rows import READY, ended, reading

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
            assert (
                "launching on this host; on alpha: ddconsole --demo --host alpha up"
                in "\n".join(notes)
            )
    finally:
        await fleet.stop()


async def test_remote_rows_ended_folded_logs_elsewhere_tail_replaced_cursor_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """alpha lists a ready server, one that failed a minute ago and one two hours ago: the
    old one is folded until `a`; x on the failed one asks to forget it there; the cursor
    waits on alpha's row while its server is missing and goes back to it; a log tail
    replaces the last; a server with a call running there, or on a stale host, is not acted
    on again; `l` on alpha's server never shows a local one of the same id."""
    backend = Services.create(demo=True).live_backend(recordings=None)
    backend.fleet = fleet = _fleet()
    now = time.time()
    failed = {**ended(60, now), "id": "qwen3.6-27b-tp1-2"}
    data = reading()
    data["servers"] = [READY, failed, {**ended(7200, now), "id": "old-1"}]
    assert fleet._take(fleet._hosts["alpha"], json.dumps(data))
    app = ConsoleApp(backend, mode="servers")
    notes: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **_: notes.append(str(message)))
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, ServersScreen)
            table = screen.query_one("#list", DataTable)
            failed_key = "remote:alpha/qwen3.6-27b-tp1-2"
            await until(pilot, lambda: failed_key in _keys(table), what="alpha's servers")
            assert "remote:alpha/old-1" not in _keys(table)
            await pilot.press("a")
            await until(pilot, lambda: "remote:alpha/old-1" in _keys(table), what="unfolded")
            table.focus()

            table.move_cursor(row=_keys(table).index(failed_key))
            await pilot.pause()
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirm")
            confirm = app.screen
            assert isinstance(confirm, ConfirmScreen)
            assert confirm.title_text == "Forget qwen3.6-27b-tp1-2 on alpha?"
            assert "has ended (failed: killed by SIGKILL)" in confirm.detail
            await pilot.press("n")
            await pilot.pause()

            # alpha's server leaves its reading (a restart there), then comes back.
            table.move_cursor(row=_keys(table).index(GOOD))
            await pilot.pause()
            data["servers"] = [failed]
            assert fleet._take(fleet._hosts["alpha"], json.dumps(data))
            screen.refresh_data()
            await pilot.pause()
            assert screen._selected_key() == "host:alpha"
            data["servers"] = [READY, failed]
            assert fleet._take(fleet._hosts["alpha"], json.dumps(data))
            screen.refresh_data()
            await pilot.pause()
            assert screen._selected_key() == GOOD

            def activity() -> str:
                return "\n".join(line.text for line in screen.query_one("#activity", RichLog).lines)

            screen._show_tail("alpha x: last 1 lines at 05:00:00", ["first tail"])
            screen._say("stop something")
            screen._show_tail("alpha x: last 1 lines at 05:00:09", ["second tail"])
            await pilot.pause()
            text = activity()
            assert "first tail" not in text
            assert "05:00:00" not in text
            assert text.index("stop something") < text.index("alpha x: last 1 lines at 05:00:09")

            # A restart of it still running there: neither x nor R starts another call.
            calls = remote_calls(app)
            calls.start("alpha", READY["id"], "restart")
            for key in ("x", "R"):
                await pilot.press(key)
                await pilot.pause()
                assert not isinstance(app.screen, ConfirmScreen), key
            assert notes[-1].startswith(f"restart {READY['id']} on alpha is still running")
            # Quitting would end that restart midway there: q asks first, n stays.
            await pilot.press("q")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="a question")
            asked = app.screen
            assert isinstance(asked, ConfirmScreen)
            assert f"restart {READY['id']} on alpha" in asked.detail
            assert "midway" in asked.detail
            await pilot.press("n")
            await until(pilot, lambda: app.screen is screen, what="the Servers screen again")
            assert app.is_running
            calls.end("alpha", READY["id"])
            # alpha stale: its server reads as last known, and x, R, enter say why not.
            fleet._set(fleet._hosts["alpha"], "stale", "connection lost")
            screen.refresh_data()
            await pilot.pause()
            assert str(table.get_row(GOOD)[COLUMNS.index("STATE")]) == "last: ready"
            for key in ("x", "R", "enter"):
                await pilot.press(key)
                await pilot.pause()
                assert not isinstance(app.screen, ConfirmScreen), key
            assert notes[-1].startswith("alpha is stale (connection lost); when it is back:")
            assert [n.split(": ")[-1] for n in notes[-3:]] == [
                f"ddconsole --demo --host alpha {verb} {READY['id']}"
                for verb in ("down", "restart", "logs")
            ]

            await pilot.press("l")
            await until(pilot, lambda: isinstance(app.screen, LogsScreen), what="Logs")
            logs = app.screen
            assert isinstance(logs, LogsScreen)
            await until(pilot, lambda: logs.remote is not None, what="the remote log note")
            assert (logs.remote, logs.server_id) == (("alpha", READY["id"]), None)
            note = str(logs.query_one("#reason", Static).render())
            assert f"ddconsole --demo --host alpha logs {READY['id']} -f" in note
    finally:
        await fleet.stop()
