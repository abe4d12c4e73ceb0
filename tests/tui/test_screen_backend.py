"""Screens show the backend they are given: no screen reaches for the app to find it."""

from __future__ import annotations

from textual.app import App
from textual.widgets import DataTable

from console.tui.app import ConsoleApp
from console.tui.replay import REFUSED
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.dashboard import DashboardScreen
from console.tui.screens.launch import LaunchScreen
from console.tui.screens.logs import LogsScreen
from console.tui.screens.servers import ServersScreen
from console.tui.widgets.pane import Pane
from console.tui.widgets.topbar import TopBar
from tests.tui.conftest import settle
from tests.tui.scene import A, B, C, SceneBackend


class PlainApp(App[None]):
    """A bare Textual app with no backend of its own: a screen must bring its own."""

    def __init__(self, screen: ConsoleScreen) -> None:
        super().__init__()
        self.shown = screen

    def on_mount(self) -> None:
        self.push_screen(self.shown)


async def test_a_mode_screen_runs_in_a_plain_app_on_the_backend_it_is_given(
    scene_backend: SceneBackend,
) -> None:
    screen = DashboardScreen(scene_backend)
    app = PlainApp(screen)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        screen.refresh_data()
        await pilot.pause()
        assert screen.backend is scene_backend
        strip = screen.query_one("#strip", Pane).text.plain
        for server in (A, B, C):
            assert server in strip
        bar = str(screen.query_one(TopBar).render())
        assert "Dashboard" in bar
        assert "DEMO" in bar  # the badge read from the given backend, not the app


async def test_the_launch_dialog_plans_on_the_backend_it_is_given(
    scene_backend: SceneBackend,
) -> None:
    """A replay refuses to plan: the dialog says so, from the backend it was built with."""
    dialog = LaunchScreen(scene_backend)
    app = App[None]()
    async with app.run_test(size=(160, 50)) as pilot:
        app.push_screen(dialog)
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert dialog.plan is None
        assert dialog.error == REFUSED


async def test_the_servers_screen_asks_the_app_for_a_servers_log(
    scene_backend: SceneBackend,
) -> None:
    """The Servers screen names the highlighted server; the app switches to its log."""
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        servers = app.screen
        assert isinstance(servers, ServersScreen)
        assert servers.query_one("#list", DataTable).row_count == 3
        await pilot.press("down")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert app.current_mode == "logs"
        assert isinstance(app.screen, LogsScreen)
        assert app.screen.server_id == B
