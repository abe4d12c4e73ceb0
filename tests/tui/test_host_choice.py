"""The host picker and its absence: without a fleet (the demo scene, a replay) there is no
`H`, no host in the title and no picker; the picker itself lists the hosts it is given,
`local` first with the shown one marked, and answers the name picked (Esc: none)."""

from __future__ import annotations

import json

from textual.app import App, ComposeResult
from textual.widgets import OptionList, Static

from console.fleet.host_store import HOST_CAPACITY, HOST_MAX_SERIES, HostStore, feed, mark_stale
from console.fleet.summary import HostSummary
from console.telemetry.store import TimeSeriesStore
from console.tui.app import ConsoleApp
from console.tui.host_choice import (
    HostPicker,
    RemoteHost,
    host_label,
    stale_now_line,
    with_store_note,
)
from console.tui.screens.modals import HelpScreen
from console.tui.views import FeedNote
from console.tui.widgets.keybar import KeyBar
from console.tui.widgets.now_line import now_line
from console.tui.widgets.topbar import TopBar
from tests.conftest import REPO
from tests.tui.conftest import settle

READING = json.loads((REPO / "tests/unit/fixtures/metrics-demo-reading.json").read_text())
"""A reading as `ddconsole --demo metrics --once --json` printed it (one ready server)."""
SERVER = "qwen3.6-27b-tp1-1"


def _host(name: str, state: str = "up", reason: str | None = None) -> HostSummary:
    return HostSummary(
        name=name,
        target="local" if name == "local" else f"tester@{name}:22",
        state=state,
        reason=reason,
        gpus_busy=1,
        gpus_total=8,
        servers=(),
        servers_ready=0,
        tok_s=None,
        sources=(),
        age_s=1.0,
        updated_wall=None,
    )


HOSTS = [_host("local"), _host("alpha"), _host("beta", "stale", "connection lost")]


async def test_without_a_fleet_there_is_no_host_key(scene_backend) -> None:
    app = ConsoleApp(scene_backend)
    async with app.run_test(size=(160, 50)) as pilot:
        for mode_key, title in (("d", "Dashboard"), ("t", "Topology")):
            await pilot.press(mode_key)
            await settle(pilot)
            assert app.screen.query_one(TopBar).screen_name == title
            assert " Host " not in str(app.screen.query_one(KeyBar).render())
            screen = app.screen
            await pilot.press("H")
            await settle(pilot)
            assert app.screen is screen
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert "H" not in dict(app.screen.rows)


class PickerApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.answers: list[str | None] = []

    def compose(self) -> ComposeResult:
        yield Static("under the picker")

    def pick(self) -> None:
        self.push_screen(HostPicker(HOSTS, "alpha"), self.answers.append)


async def test_the_picker_lists_hosts_with_their_state_and_answers_the_pick() -> None:
    app = PickerApp()
    async with app.run_test(size=(100, 30)) as pilot:
        app.pick()
        await pilot.pause()
        options = app.screen.query_one(OptionList)
        lines = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert lines[0].split()[0] == "local"
        assert lines[1].startswith("● alpha")  # the one shown
        assert "stale: connection lost" in lines[2]
        assert options.highlighted == 1
        await pilot.press("down", "enter")
        await pilot.pause()
        app.pick()
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
    assert app.answers == ["beta", None]


def test_host_labels_name_the_state_and_reason() -> None:
    assert host_label(HOSTS[1]) == "host alpha"
    assert host_label(HOSTS[2]) == "host beta (stale: connection lost)"
    assert host_label(_host("gamma", "connecting")) == "host gamma (connecting)"


def test_a_stale_hosts_figures_never_read_as_now() -> None:
    """alpha's last reading (the demo one `metrics --json` printed) and then its link lost:
    the Dashboard's now line says stale, how long ago and why, with the server's figures
    dim as its last ones; the strip reads `stale` with the state last read; up again, it
    is `now` as before."""
    store = TimeSeriesStore(HOST_CAPACITY, HOST_MAX_SERIES)
    feed(store, READING, 100.0)
    host = HostStore("alpha", store, reading=READING, fed_mono=100.0)
    remote = RemoteHost(host, _host("alpha"))
    [server] = remote.servers()
    assert server.state == "ready"
    assert remote.stale_reason is None
    assert remote.strip_servers([server]) == [server]
    assert now_line(store, server, 200, 101.0).plain.startswith(f"now {SERVER}")

    remote.summary = _host("alpha", "stale", "connection lost: reset by peer")
    mark_stale(store, "host alpha stale")
    line = stale_now_line(store, server, remote, 100.0 + 900).plain
    assert line.startswith("stale 15m00s: connection lost: reset by peer")
    assert "now " not in line
    assert "last 0.0 tok/s" in line
    assert "read 900 s before now" in line
    [row] = remote.strip_servers([server])
    assert row.state == "stale"
    assert row.reason == "host alpha stale; last read ready"
    assert stale_now_line(store, None, remote, 1000.0).plain.startswith("stale 15m00s: ")


def test_series_a_full_store_refused_are_named_on_the_sources_line() -> None:
    store = TimeSeriesStore(4, 20)
    assert with_store_note(None, store) is None
    feed(store, READING, 1.0)
    dropped = store.dropped_series
    assert dropped > 0
    note = with_store_note(None, store)
    assert note == FeedNote(f"store full: {dropped} series not kept", False)
    host = RemoteHost(HostStore("alpha", store, READING, 1.0), _host("alpha"))
    note = host.feed_note(3.0)
    assert note.text.endswith(f"read 2.0s ago; store full: {dropped} series not kept")
    assert not note.ok
