"""Text that comes from elsewhere (another host's run names, phases, server ids, reasons) is
shown as sent: a `[/]` in it is neither read as markup nor able to fail a paint, in a
table cell, a confirmation, a notice over a dialog, or a remote server's detail."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Static

from console.tui.app import ConsoleApp
from console.tui.remote_rows import remote_detail, remote_hosts
from console.tui.screens.modals import ConfirmScreen
from console.tui.widgets.filled_table import fill_table
from tests.tui.conftest import settle
from tests.unit.test_remote_rows import READY, reading, render, summary

HOSTILE = "a[/]b [bold]c[/bold] [link=x]d"


class OneTable(App[None]):
    def compose(self) -> ComposeResult:
        yield DataTable()

    def on_mount(self) -> None:
        fill_table(self.query_one(DataTable), ["NAME", "NOW"], [("k", [HOSTILE, HOSTILE])])


async def test_a_table_cell_shows_markup_like_text_as_it_is() -> None:
    app = OneTable()
    async with app.run_test(size=(120, 10)) as pilot:
        await pilot.pause()
        table = app.query_one(DataTable)
        cell = table.get_row("k")[0]
        assert isinstance(cell, Text)
        assert cell.plain == HOSTILE


async def test_a_confirmation_and_a_notice_over_it_show_markup_like_text(
    scene_backend: Any,
) -> None:
    app = ConsoleApp(scene_backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.push_screen(ConfirmScreen(f"Stop benchmark {HOSTILE} on alpha?", f"now {HOSTILE}"))
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        shown = [str(static.render()) for static in app.screen.query(Static)]
        assert f"Stop benchmark {HOSTILE} on alpha?" in shown
        assert f"now {HOSTILE}" in shown
        app.notify(f"runs stop on alpha: {HOSTILE}", severity="error")  # a toast over it
        await settle(pilot)
        assert app.notices[-1] == f"runs stop on alpha: {HOSTILE}"
    # Leaving run_test re-raises a failed paint; reaching here means none failed.


def test_a_remote_servers_detail_shows_its_fields_as_sent() -> None:
    data = reading()
    data["servers"] = [{**READY, "id": f"srv{HOSTILE}", "log_path": f"/var/log/{HOSTILE}.log"}]
    [host] = remote_hosts([summary("alpha")], lambda _: data)
    text = render(remote_detail(host.servers[0], host))
    assert f"srv{HOSTILE}" in text
    assert f"/var/log/{HOSTILE}.log" in text
