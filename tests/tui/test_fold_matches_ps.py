"""The TUI folds an ended server by the same end `ddconsole ps` does (the status's exit
record, stop request or log's last write), not by launch + uptime: a server whose waiter
was killed with it has no exit record, so its uptime runs on to now, while its stop was
requested two hours ago. Records written straight into the demo state dir."""

from __future__ import annotations

import json
import time

from textual.widgets import DataTable, Static

from console.cli.services import Services
from console.server.tidy import ended_wall as status_ended_wall
from console.tui.app import ConsoleApp
from console.tui.fold import ended_wall, split_folded
from console.tui.live import view_of
from console.tui.views import ServerView
from tests.tui.conftest import settle, until
from tests.tui.made_servers import gone_pid, write_server
from tests.tui.test_filter_tables import row_keys

GONE = "qwen3.6-27b-tp1-7"
HOUR = 3600.0


def stopped_two_hours_ago(services: Services) -> float:
    """A server launched 3 h ago whose stop was asked 2 h ago and whose waiter died with
    it (no exit record): its uptime, counted to now, says it ran until now."""
    now = time.time()
    pid, ticks = gone_pid()
    write_server(
        services,
        GONE,
        (3,),
        launched_wall=now - 3 * HOUR,
        pid=pid,
        start_ticks=ticks,
        stop_requested_wall=now - 2 * HOUR,
    )
    return now - 2 * HOUR


def test_the_view_carries_the_status_end(cli) -> None:
    services = Services.create(demo=True)
    asked = stopped_two_hours_ago(services)
    (status,) = services.manager().statuses()[0]
    assert status.state.terminal
    assert status.uptime_s is not None
    assert status.uptime_s > 2.9 * HOUR
    view = view_of(status)
    assert status_ended_wall(status) == asked
    assert ended_wall(view) == asked
    # `ps --json` says so too, additively.
    listed = json.loads(cli("--demo", "ps", "--all", "--json").out)
    assert [(s["id"], s["ended_wall"]) for s in listed] == [(GONE, asked)]


def test_a_view_from_an_older_recording_falls_back_to_launch_and_uptime() -> None:
    data = {"id": "old", "state": "stopped", "launched_wall": 1000.0, "uptime_s": 50.0}
    assert ended_wall(ServerView.from_json(data)) == 1050.0
    # Carried but null: not ended (processes left), as `ps` reads it.
    assert ended_wall(ServerView.from_json({**data, "ended_wall": None})) is None
    assert split_folded([ServerView.from_json({**data, "ended_wall": 10.0})], 5000.0, 3600)[1] != []


async def test_the_servers_screen_folds_it_as_ps_does(cli) -> None:
    services = Services.create(demo=True)
    stopped_two_hours_ago(services)
    shown = cli("--demo", "ps")
    assert GONE not in shown.out
    assert "1 stopped server hidden" in shown.out

    app = ConsoleApp(services.live_backend(recordings=None), mode="servers")
    async with app.run_test(size=(120, 40)) as pilot:
        note = app.screen.query_one("#folded", Static)
        await until(pilot, lambda: note.has_class("shown"), 20, "the folded note")
        await settle(pilot)
        assert row_keys(app.screen.query_one("#list", DataTable)) == []
        assert str(note.content).startswith("1 stopped server hidden (ended over 1h ago)")
