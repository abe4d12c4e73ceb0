"""The Servers screen with a fleet: this host's servers as before, then alpha's row and the
servers of its reading. A server stopped from alpha's row (confirmed, the confirm naming the
host) stops on alpha only: a local server with the very same id keeps running. Alpha's SSH
server stopped, its row reads stale with the reason. Enter on alpha's server shows its log's
tail, read there."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from textual.widgets import DataTable, RichLog

from console.cli.services import Services
from console.fleet.hosts import hosts_path
from console.tui.app import ConsoleApp
from console.tui.remote_calls import remote_calls
from console.tui.screens.modals import ConfirmScreen
from console.tui.screens.servers import ServersScreen
from tests.conftest import CliResult
from tests.fleet.conftest import DDCONSOLE, SshWorld
from tests.fleet.test_fleet_tui import _dd
from tests.tui.conftest import until

pytestmark = pytest.mark.slow

SERVER = "qwen3.6-27b-tp1-1"
REMOTE = f"remote:alpha/{SERVER}"


def _rows(app: ConsoleApp) -> dict[str, str]:
    """The Servers list: each row's key and its cells joined."""
    table = app.screen.query_one("#list", DataTable)
    rows = {}
    for index in range(table.row_count):
        key = table.coordinate_to_cell_key((index, 0)).row_key.value  # type: ignore[arg-type]
        cells = [str(getattr(c, "plain", c)) for c in table.get_row_at(index)]
        rows[str(key)] = " | ".join(cells)
    return rows


def _activity(app: ConsoleApp) -> str:
    return "\n".join(line.text for line in app.screen.query_one("#activity", RichLog).lines)


UP_ARGS = ["up", "qwen3.6-27b", "--layout", "tp1", "--port"]


def _two_ports() -> tuple[int, int]:
    """Two free ports, held open together while chosen so they cannot be the same one."""
    with socket.socket() as one, socket.socket() as two:
        one.bind(("127.0.0.1", 0))
        two.bind(("127.0.0.1", 0))
        return int(one.getsockname()[1]), int(two.getsockname()[1])


def _up(port: int) -> subprocess.CompletedProcess[str]:
    return _dd(*UP_ARGS, str(port))


async def test_servers_grouped_by_host_stop_only_the_remote_one(
    ssh_world: SshWorld, cli: Callable[..., CliResult]
) -> None:
    def local_ps() -> dict[str, Any]:
        """This host's server as `ps --json` has it (read in-process: the app holds stdout)."""
        status = Services.create(demo=True).manager().status(SERVER, probe=False)
        return {SERVER: status.to_json()}

    path = hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'[[host]]\nname = "alpha"\ntarget = "alpha"\nddconsole = "{DDCONSOLE}"\n')
    app = ConsoleApp(Services.create(demo=True).live_backend(recordings=None))
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.press("s")
            assert isinstance(app.screen, ServersScreen)
            fleet = app.backend.fleet_now()
            assert fleet is not None
            # The same profile and layout here and on alpha (over the fleet's own link): two
            # servers with one id.
            # Each on its own port, so the two launches cannot race for one.
            mine, theirs = _two_ports()
            here, there = await asyncio.gather(
                asyncio.to_thread(_up, mine), fleet.run("alpha", [*UP_ARGS, str(theirs)], 120)
            )
            assert here.returncode == 0, f"{here.stdout}\n{here.stderr}"
            assert there.exit_status == 0, f"{there.stdout}\n{there.stderr}"
            # What the screen's actions send there names one server only: a prefix is refused.
            prefix = await fleet.run("alpha", ["down", SERVER[:-2], "--exact", "--yes"], 60)
            assert prefix.exit_status == 2, f"{prefix.stdout}\n{prefix.stderr}"
            assert "exact id" in prefix.stderr
            local_pid = local_ps()[SERVER]["pid"]
            await until(
                pilot,
                lambda: "ready" in _rows(app).get(REMOTE, "") and "ready" in _rows(app)[SERVER],
                60,
                "both servers ready, alpha's under its row",
            )
            rows = _rows(app)
            assert rows["host:alpha"].startswith("alpha  up"), rows
            assert list(rows).index(SERVER) < list(rows).index("host:alpha")
            assert list(rows).index("host:alpha") + 1 == list(rows).index(REMOTE)

            table = app.screen.query_one("#list", DataTable)
            table.focus()
            table.move_cursor(row=list(rows).index(REMOTE))
            await pilot.pause()
            await pilot.press("enter")  # the log's tail, read on alpha
            await until(
                pilot,
                lambda: f"alpha {SERVER}: last " in _activity(app),
                30,
                "alpha's log tail",
            )
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 10, "confirm")
            confirm = app.screen
            assert isinstance(confirm, ConfirmScreen)
            assert confirm.title_text == f"Stop {SERVER} on alpha?"
            await pilot.press("y")
            # Until it answers, quitting asks first (it would end the stop there midway).
            assert remote_calls(app).described() == [f"stop {SERVER} on alpha"]
            await until(
                pilot, lambda: "stopped (SIGTERM" in _activity(app), 60, "the stop's answer"
            )
            await until(pilot, lambda: not remote_calls(app).described(), 10, "the call ended")
            # Gone from alpha's reading (or listed as stopped), and so on alpha itself.
            await until(
                pilot,
                lambda: "ready" not in _rows(app).get(REMOTE, "gone"),
                30,
                "alpha's server gone from its row",
            )
            answer = await fleet.run("alpha", ["ps", "--json"], timeout_s=60)
            assert answer.exit_status == 0, f"{answer.stdout}\n{answer.stderr}"
            on_alpha = {s["id"]: s for s in json.loads(answer.stdout)}
            assert on_alpha[SERVER]["state"] == "stopped", on_alpha
            mine = local_ps()[SERVER]
            assert (mine["state"], mine["pid"]) == ("ready", local_pid)

            await asyncio.to_thread(ssh_world.hosts["alpha"].stop)
            await until(
                pilot, lambda: "alpha  stale" in _rows(app).get("host:alpha", ""), 30, "stale"
            )
            row = _rows(app)["host:alpha"]
            assert any(why in row for why in ("connection lost", "refused", "cannot connect")), row
    finally:
        cli("--demo", "down", "--all", "--grace", "2")
        # alpha's own servers too, in its own environment (its SSH server may be stopped).
        subprocess.run(
            [DDCONSOLE, "--demo", "down", "--all", "--grace", "2"],
            env=ssh_world.hosts["alpha"].env,
            capture_output=True,
            timeout=60,
            check=False,
        )
