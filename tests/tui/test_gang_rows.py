"""A multi-node server in the Servers list: one row for the gang, its nodes indented under it
(rank, host, pid, state), and the gang's stop reason when a node ended.

A snapshot of the fixed scene with two gangs added (one ready, one stopped by its rank 1),
and the live console over the demo's real two-node kimi-k2.6 `tp16-2node`, rank 1 killed.
"""

from __future__ import annotations

import io
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import DataTable

from console.cli.services import Services
from console.core.net import free_port
from console.tui.app import ConsoleApp
from console.tui.screens.servers import ServersScreen, server_detail
from console.tui.views import ServerView
from console.tui.widgets.finder import Finder, FindRow
from console.tui.widgets.server_strip import ServerStrip
from tests.conftest import run_cli_subprocess
from tests.tui import scene
from tests.tui.conftest import settle, until

HEAD = "kimi-k2.6-tp16-2node-1"
GANG_REASON = "node 1 exited 137 (SIGKILL); the gang was stopped"


def _node(head: str, rank: int, state: str, pid: int, **extra: Any) -> dict[str, Any]:
    node_id = head if rank == 0 else f"{head}.node{rank}"
    return {
        "id": node_id,
        "profile": "kimi-k2.6",
        "layout": "tp16-2node",
        "variant": "off",
        "state": state,
        "pid": pid,
        "port": 30400 + rank,
        "url": f"http://127.0.0.1:{30400 + rank}",
        "gpus": list(range(8)),
        "numa_nodes": [0, 1],
        "uptime_s": 95.0,
        "demo": True,
        "gang": [head, f"{head}.node1"],
        "node_rank": rank,
        "nodes": ["local", "local"],
        **extra,
    }


GANGS = [
    _node(HEAD, 0, "ready", 4101),
    _node(HEAD, 1, "ready", 4102),
    _node(
        "kimi-k2.6-tp16-2node-2",
        0,
        "failed",
        4201,
        reason=GANG_REASON,
        failure_kind="gang",
        uptime_s=None,
    ),
    _node(
        "kimi-k2.6-tp16-2node-2",
        1,
        "failed",
        4202,
        reason="killed by SIGKILL",
        failure_kind="killed",
        uptime_s=None,
    ),
]


class GangScene(scene.SceneBackend):
    """The fixed scene with the two gangs above listed after its own servers."""

    def servers(self) -> list[ServerView]:
        return [*super().servers(), *(ServerView.from_json(g) for g in GANGS)]


def _rows(app: ConsoleApp) -> list[str]:
    table = app.screen.query_one("#list", DataTable)
    cells = [
        [str(getattr(c, "plain", c)).strip() for c in table.get_row_at(i)]
        for i in range(table.row_count)
    ]
    return [" ".join(c for c in row if c) for row in cells]


def test_a_follower_row_stays_under_its_leader_through_sort_and_filter() -> None:
    rows = [
        FindRow("b", {"ID": "b", "UP": "2"}),
        FindRow("node:b", {"ID": "rank 1 hostx", "UP": "1"}, follows="b"),
        FindRow("a", {"ID": "a", "UP": "3"}),
    ]
    finder = Finder(column="UP")
    assert [r.key for r in finder.apply(rows)] == ["b", "node:b", "a"]
    finder.descending = True
    assert [r.key for r in finder.apply(rows)] == ["a", "b", "node:b"]
    # Found by its node's host: the gang's row comes along.
    assert [r.key for r in Finder(text="hostx").apply(rows)] == ["b", "node:b"]


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
def test_servers_screen_with_gangs(snap_compare, size: tuple[int, int]) -> None:
    app = ConsoleApp(GangScene(scene.ROOT), mode="servers")

    async def ready(pilot: Pilot[None]) -> None:
        await settle(pilot)
        # The stopped gang is listed even where the fold would hide it.
        await pilot.press("a")
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=ready)


async def test_gang_rows_are_grouped_under_the_head() -> None:
    app = ConsoleApp(GangScene(scene.ROOT), mode="servers")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)
        rows = _rows(app)
        heads = [i for i, r in enumerate(rows) if r.startswith("kimi-k2.6-tp16-2node-")]
        assert len(heads) == 2, rows  # one row per gang, not per node
        first = heads[0]
        assert rows[first + 1].startswith("└ rank 0 local pid 4101"), rows
        assert rows[first + 2].startswith("└ rank 1 local pid 4102"), rows
        failed = rows[heads[1]]
        assert GANG_REASON in failed, failed
        assert "killed by SIGKILL" in rows[heads[1] + 2]
        # A node's row selects that node: its detail names its place in the gang.
        app.screen.query_one("#list", DataTable).move_cursor(row=first + 2)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ServersScreen)
        selected = screen.selected()
        assert selected is not None
        assert selected.id == f"{HEAD}.node1"
        printer = Console(width=160, record=True, file=io.StringIO())
        printer.print(server_detail(selected))
        detail = printer.export_text()
        assert f"node 1 of 2 on local (head {HEAD})" in detail, detail
        assert "4102" in detail


@pytest.fixture
def demo_gang(user_profiles: Path) -> Iterator[dict[str, Any]]:
    env = {**os.environ, "DDCONSOLE_SIM_SPEED": "20"}
    env.pop("DDCONSOLE_SIM_FAULT", None)
    result = run_cli_subprocess(
        "--demo",
        "up",
        "kimi-k2.6",
        "--layout",
        "tp16-2node",
        "--port",
        str(free_port()),
        "--json",
        env=env,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    try:
        yield json.loads(result.stdout)
    finally:
        run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=env)


@pytest.mark.slow
async def test_live_gang_killed_rank_shows_the_gang_reason(demo_gang: dict[str, Any]) -> None:
    head = demo_gang["id"]
    services = Services.create(demo=True)
    app = ConsoleApp(services.live_backend(recordings=None), mode="servers")
    async with app.run_test(size=(160, 50)) as pilot:
        await until(
            pilot, lambda: sum(" ready" in r for r in _rows(app)) >= 3, 60, "the gang ready"
        )
        rows = _rows(app)
        assert [r for r in rows if r.startswith(head)] == [rows[0]], rows
        assert rows[1].startswith(f"└ rank 0 local pid {demo_gang['pid']}"), rows
        assert rows[2].startswith("└ rank 1 local pid"), rows
        rank1_pid = int(rows[2].split("pid ")[1].split()[0])
        # The dashboard's strip lists the gang by its head alone (node 1 serves no API).
        await pilot.press("d")
        await settle(pilot)
        strip = app.screen.query_one(ServerStrip).text.plain
        assert head in strip, strip
        assert ".node1" not in strip, strip
        await pilot.press("s")
        await settle(pilot)
        os.kill(rank1_pid, signal.SIGKILL)
        try:
            await until(
                pilot,
                lambda: GANG_REASON in _rows(app)[0],
                60,
                "the gang's stop reason on its row",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {_rows(app)}") from None
        assert isinstance(app.screen, ServersScreen)
        assert "failed" in _rows(app)[2]
