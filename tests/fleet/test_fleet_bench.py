"""The Bench screen with a fleet, over real asyncssh hosts: alpha's ready demo server is a
target labelled with its host; `g` on it starts the benchmark on alpha through its own CLI
(detached), and the run is then listed under alpha and followed to its levels, read there.
Beta, gone, is a note saying why in both lists."""

from __future__ import annotations

import asyncio

import pytest
from rich.console import Console
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Input, OptionList, Static

from console.cli.services import Services
from console.core.net import free_port
from console.tui.app import ConsoleApp
from console.tui.screens.bench import BenchScreen
from console.tui.screens.modals import ConfirmScreen
from tests.fleet.conftest import SshWorld, write_hosts_toml
from tests.fleet.test_fleet_tui import _dd
from tests.tui.conftest import until

pytestmark = pytest.mark.slow

SERVER = "qwen3.6-27b-tp1-1"
TARGET = f"remote:alpha/{SERVER}"


def _rows(table: DataTable[object]) -> dict[str, list[str]]:
    """The runs list: each row's key and its cells' text."""
    return {
        str(table.coordinate_to_cell_key(Coordinate(i, 0)).row_key.value): [
            str(getattr(cell, "plain", cell)) for cell in table.get_row_at(i)
        ]
        for i in range(table.row_count)
    }


def _levels(screen: BenchScreen) -> str:
    console = Console(width=200, record=True)
    console.print(screen.query_one("#levels-text", Static).content)
    return console.export_text()


async def test_g_on_another_hosts_server_benchmarks_it_there(ssh_world: SshWorld) -> None:
    write_hosts_toml(ssh_world)
    await asyncio.to_thread(ssh_world.hosts["beta"].stop)  # beta is gone from the start
    port = free_port()
    # alpha's server is launched there as its user would, while the console starts.
    up = asyncio.create_task(
        asyncio.to_thread(
            _dd, "--host", "alpha", "up", "qwen3.6-27b", "--layout", "tp1", "--port", str(port)
        )
    )
    backend = Services.create(demo=True).live_backend(recordings=None)
    app = ConsoleApp(backend)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("b")
        screen = app.screen
        assert isinstance(screen, BenchScreen)
        done = await asyncio.wait_for(up, 120)
        assert done.returncode == 0, done.stderr
        targets = screen.query_one("#targets", OptionList)

        def offered() -> list[str]:
            return [str(targets.get_option_at_index(i).id) for i in range(targets.option_count)]

        await until(pilot, lambda: TARGET in offered(), 60, "alpha's server as a target")
        options = [targets.get_option_at_index(i) for i in range(targets.option_count)]
        labels = [getattr(o.prompt, "plain", str(o.prompt)) for o in options]
        assert labels[offered().index(TARGET)].startswith(f"alpha  {SERVER}  off  :{port}")
        assert "host:beta" in offered()  # a note, not a target
        assert options[offered().index("host:beta")].disabled

        # The smallest load the fields take: one level of one short request.
        for field, value in (("concurrency", "1"), ("requests", "1")):
            screen.query_one(f"#{field}", Input).value = value
        screen.query_one("#input-len", Input).value = "16"
        screen.query_one("#output-len", Input).value = "8"
        targets.highlighted = offered().index(TARGET)
        targets.focus()
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 30, "the confirmation")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        asked = confirm.detail
        assert "runs detached on alpha: ddconsole --demo --host alpha bench" in asked, asked
        assert f"--server={SERVER} --concurrency=1 --requests=1" in asked, asked
        await pilot.press("y")

        table = screen.query_one("#recent", DataTable)

        def started() -> str | None:
            return next((k for k in _rows(table) if k.startswith("alpha/")), None)

        await until(pilot, lambda: started() is not None, 60, "the run listed under alpha")
        key = started()
        assert key is not None
        run_id = key.removeprefix("alpha/")
        assert _rows(table)[key][0] == "alpha"
        await until(pilot, lambda: "beta//error" in _rows(table), 30, "beta's note")
        # Selected once listed (it was started here), and followed to its levels read there.
        await until(pilot, lambda: screen._selected_run() == key, 30, "the run followed")
        await until(
            pilot,
            lambda: "on host alpha" in _levels(screen) and "[done]" in _levels(screen),
            60,
            "the run done, its levels shown",
        )
        text = _levels(screen)
        assert run_id in text, text
        assert "bench-qwen3.6-27b" in text, text
