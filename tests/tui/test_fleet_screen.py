"""The Fleet screen over fixed host summaries (the fleet itself is tested over real SSH hosts
in tests/fleet/test_fleet_tui.py): the rows, a stale host's reason with its last figures,
enter narrowing the servers to one host, and a replay's refusal."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from console.fleet.fleet import Fleet
from console.fleet.summary import HostSummary, ServerBrief, SourceBrief
from console.tui.app import ConsoleApp
from console.tui.screens.fleet import FleetScreen
from tests.tui import scene
from tests.tui.conftest import settle


def _host(name: str, target: str, state: str, **extra: object) -> HostSummary:
    values: dict[str, object] = {
        "name": name,
        "target": target,
        "state": state,
        "reason": None,
        "gpus_busy": 2,
        "gpus_total": 8,
        "servers": (),
        "servers_ready": 0,
        "tok_s": None,
        "sources": (SourceBrief("gpu", "ok", None),),
        "age_s": 0.6,
        "updated_wall": 1_800_000_000.0,
    }
    values.update(extra)
    return HostSummary(**values)  # type: ignore[arg-type]


def _server(server_id: str, state: str, tok_s: float | None, port: int) -> ServerBrief:
    return ServerBrief(server_id, state, tok_s, (0,), f"http://127.0.0.1:{port}", False)


HOSTS = [
    _host(
        "local",
        "local",
        "up",
        servers=(_server("qwen3.6-27b-tp1-1", "ready", 173.4, 30000),),
        servers_ready=1,
        tok_s=173.4,
    ),
    _host(
        "gpu2",
        "ops@gpu2.lab",
        "stale",
        reason="connection lost: Connection reset by peer",
        servers=(_server("kimi-k2.6-tp8-1", "ready", 807.5, 30000),),
        servers_ready=1,
        tok_s=807.5,
        age_s=42.0,
    ),
    _host("gpu3", "gpu3", "up", gpus_busy=0, tok_s=None),
]


class FixedFleet(Fleet):
    """A fleet whose hosts read as HOSTS, always (no link, no stream)."""

    def __init__(self) -> None:
        super().__init__([])

    async def start(self) -> None:
        return None

    def summaries(self) -> list[HostSummary]:
        return list(HOSTS)


class FleetScene(scene.SceneBackend):
    async def open_fleet(self) -> Fleet:
        return FixedFleet()


def _rows(app: ConsoleApp) -> dict[str, str]:
    table = app.screen.query_one("#hosts", DataTable)
    rows = {}
    for index in range(table.row_count):
        cells = [str(getattr(c, "plain", c)) for c in table.get_row_at(index)]
        rows[cells[0]] = " | ".join(cells)
    return rows


def _servers_text(app: ConsoleApp) -> str:
    return str(app.screen.query_one("#by-host-text", Static).render())


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
def test_fleet_screen(snap_compare, size: tuple[int, int]) -> None:
    app = ConsoleApp(FleetScene(scene.ROOT), mode="fleet")

    async def ready(pilot: Pilot[None]) -> None:
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=ready)


async def test_hosts_rows_and_enter_narrows_the_servers() -> None:
    app = ConsoleApp(FleetScene(scene.ROOT))
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("h")
        await settle(pilot)
        assert isinstance(app.screen, FleetScreen)
        rows = _rows(app)
        assert list(rows) == ["local", "gpu2", "gpu3"]
        assert rows["local"].split(" | ")[2:6] == ["up", "2/8", "1/1", "173.4"]
        stale = rows["gpu2"]
        assert "stale" in stale
        assert "connection lost: Connection reset by peer" in stale
        assert "807.5" in stale  # the last figures stay
        assert "42.0s ago" in stale or "42s ago" in stale, stale
        text = _servers_text(app)
        assert text.index("local") < text.index("qwen3.6-27b-tp1-1") < text.index("gpu2")
        assert text.index("gpu2") < text.index("kimi-k2.6-tp8-1") < text.index("gpu3")
        app.screen.query_one("#hosts", DataTable).move_cursor(row=1)
        await pilot.press("enter")
        await settle(pilot)
        text = _servers_text(app)
        assert "kimi-k2.6-tp8-1" in text
        assert "qwen3.6-27b-tp1-1" not in text
        assert "only gpu2" in text
        await pilot.press("enter")
        await settle(pilot)
        assert "qwen3.6-27b-tp1-1" in _servers_text(app)


async def test_a_replay_has_no_fleet() -> None:
    app = ConsoleApp(scene.backend(), mode="fleet")
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(pilot)
        assert "the fleet view is live only" in _servers_text(app)
        assert app.screen.query_one("#hosts", DataTable).row_count == 0
