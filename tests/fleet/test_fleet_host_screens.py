"""Dashboard and Topology show a remote host: with hosts.toml naming two asyncssh hosts
(127.0.0.2, 127.0.0.3) the console starts its fleet, `H` picks `alpha`, and the Dashboard
then draws alpha's server and GPUs from alpha's own store (fed from its readings), and
Topology alpha's GPUs by NUMA node with the server on them; alpha's SSH server stopped,
both name it stale with the reason and keep its last figures, none of them shown as now."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator

import pytest
from textual.widgets import OptionList

from console.cli.services import Services
from console.core.net import free_port
from console.telemetry.samples import SourceState
from console.tui.app import ConsoleApp
from console.tui.host_choice import HostPicker
from console.tui.screens.dashboard import DashboardScreen
from console.tui.screens.topology import TopologyScreen
from console.tui.widgets.chart import TimeChart
from console.tui.widgets.keybar import KeyBar
from console.tui.widgets.pane import Pane
from console.tui.widgets.topbar import TopBar
from tests.fleet.conftest import SshWorld, write_hosts_toml
from tests.fleet.test_fleet_tui import _dd
from tests.tui.conftest import settle, until

pytestmark = pytest.mark.slow

GPU = 5
"""Where alpha's server runs: a GPU on NUMA node 1, so no default placement explains it."""
SERVER = "qwen3.6-27b-tp1-1"


@pytest.fixture
def alpha_world(ssh_world: SshWorld) -> Iterator[SshWorld]:
    """hosts.toml naming both fake hosts; whatever the test started on alpha is stopped."""
    write_hosts_toml(ssh_world)
    yield ssh_world
    _dd("--host", "alpha", "down", "--all", "--grace", "2", timeout=60)


def _up_on_alpha() -> subprocess.CompletedProcess[str]:
    return _dd(
        "--host", "alpha", "up", "qwen3.6-27b", "--layout", "tp1",
        "--gpus", str(GPU), "--port", str(free_port()), "--no-wait",
    )  # fmt: skip


def _pane(app: ConsoleApp, selector: str) -> str:
    return app.screen.query_one(selector, Pane).text.plain


def _gpu_row(text: str, index: int, *, stale: bool = False) -> str:
    """GPU `index`'s row (`5! ` where its figures are stale)."""
    start = f"{index}! " if stale else f"{index} "
    return next(line for line in text.splitlines() if line.strip().startswith(start))


async def test_h_shows_alphas_server_and_gpus_on_dashboard_and_topology(
    alpha_world: SshWorld,
) -> None:
    app = ConsoleApp(Services.create(demo=True).live_backend(recordings=None))
    async with app.run_test(size=(160, 50)) as pilot:
        # The server on alpha starts while the console connects to its hosts.
        up = asyncio.create_task(asyncio.to_thread(_up_on_alpha))
        assert isinstance(app.screen, DashboardScreen)
        await until(pilot, app.host_choice.available, 60, "the fleet's host stores")
        alpha = app.host_choice.host_store("alpha")
        assert alpha is not None
        # Fed from the start, before alpha is ever shown: its history is there when picked.
        await until(pilot, lambda: bool(alpha.store.window("gpu.0.util_pct").times), 60)
        assert SERVER not in _pane(app, "#strip")  # this host has no server
        assert app.screen.query_one(TopBar).screen_name == "Dashboard · host local"
        done = await up
        assert done.returncode == 0, done.stderr

        assert " H Host " in str(app.screen.query_one(KeyBar).render())
        await pilot.press("H")
        await settle(pilot)
        assert isinstance(app.screen, HostPicker)
        names = app.screen.query_one(OptionList)
        assert [names.get_option_at_index(i).id for i in range(3)] == ["local", "alpha", "beta"]
        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, DashboardScreen)
        assert app.screen.query_one(TopBar).screen_name == "Dashboard · host alpha"
        await until(pilot, lambda: SERVER in _pane(app, "#strip"), 30, "alpha's server")
        gpus = _pane(app, "#gpus")
        assert SERVER in _gpu_row(gpus.split("NUMA 1")[1], GPU), gpus
        assert "host alpha over ssh" in _pane(app, "#sources")
        # Quitting now would say alpha's server keeps running too.
        assert "On other hosts, alpha: 1 server(s) keep running" in (app.leaving_message() or "")
        assert _pane(app, "#now").startswith(f"now {SERVER}")
        await until(
            pilot,
            lambda: "util" in app.screen.query_one("#chart-gpu", TimeChart).latest,
            30,
            "alpha's GPU chart",
        )

        await pilot.press("t")
        await settle(pilot)
        assert isinstance(app.screen, TopologyScreen)
        assert app.screen.query_one(TopBar).screen_name == "Topology · host alpha"
        text = _pane(app, "#topology")
        assert "host alpha" in text
        assert "8 GPUs, 2 NUMA nodes, from its latest reading" in text
        row = _gpu_row(text.split("GPUs by NUMA node")[1], GPU)
        assert SERVER in row
        assert row.split()[1:3] == ["·", "●"]  # on node 1
        assert "not known from a reading: PCIe bus ids" in text

        # alpha's SSH server goes away: both screens say so with the reason, and keep
        # alpha's last figures.
        host = alpha_world.hosts["alpha"]
        await asyncio.to_thread(host.stop)
        try:
            await until(
                pilot,
                lambda: "(stale: " in app.screen.query_one(TopBar).screen_name,
                30,
                "alpha stale",
            )
            app.refresh_now()
            await settle(pilot)
            text = _pane(app, "#topology")
            assert "last figures shown" in text
            assert SERVER in _gpu_row(text.split("GPUs by NUMA node")[1], GPU)
            await pilot.press("d")
            await settle(pilot)
            assert "host alpha stale: " in _pane(app, "#sources")
            assert {s.state for s in alpha.store.statuses().values()} == {SourceState.STALE}
            # Its last figures stay, never shown as current: the now line, the strip and
            # the GPU rows all say stale.
            now = _pane(app, "#now")
            assert now.startswith("stale "), now
            assert "now " not in now, now
            assert SERVER in now
            strip = _pane(app, "#strip")
            assert SERVER in strip
            assert "stale" in strip, strip
            gpus = _pane(app, "#gpus")
            assert SERVER in _gpu_row(gpus.split("NUMA 1")[1], GPU, stale=True), gpus
        finally:
            await asyncio.to_thread(host.start)
