"""Tidy state in the TUI: stopped servers older than config.toml's `fold_stopped_after` are
folded away from the Servers list with a count, `a` shows and hides them, and `enter` on a
row opens that server's log. Real simulator processes on free ports; a replay folds
nothing (it shows its servers as recorded)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable, RichLog, Static

from console.cli.services import Services
from console.core.net import free_port
from console.tui.app import ConsoleApp
from console.tui.fold import age_text, ended_wall, folded_note, split_folded
from console.tui.screens.logs import LogsScreen
from console.tui.views import ServerView
from tests.integration.test_prune_servers import dd
from tests.tui.conftest import settle, until
from tests.tui.scene import A, B, C, SceneBackend
from tests.tui.test_filter_tables import row_keys


@pytest.fixture
def fold_now(isolated_dirs: Path) -> None:
    """config.toml: every stopped server is folded as soon as it has ended."""
    folder = isolated_dirs / "xdg_config_home" / "ddconsole"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text('[console]\nfold_stopped_after = "0s"\n')


def note(app: ConsoleApp) -> str:
    return str(app.screen.query_one("#folded", Static).content)


@pytest.mark.slow
async def test_stopped_servers_fold_away_and_a_shows_them(fold_now: None):
    up = dd("up", "qwen3.6-27b", "-l", "tp1", "--port", str(free_port()), "--json")
    assert up.returncode == 0, up.stderr
    live = json.loads(up.stdout)["id"]
    try:
        gone = dd(
            "up", "qwen3.6-27b", "-l", "tp1", "--gpus", "5", "--port", str(free_port()), "--json"
        )
        assert gone.returncode == 0, gone.stderr
        ended = json.loads(gone.stdout)["id"]
        assert dd("down", ended, "--grace", "2").returncode == 0
        time.sleep(0.05)  # its end strictly in the past

        services = Services.create(demo=True)
        app = ConsoleApp(services.live_backend(recordings=None), mode="servers")
        async with app.run_test(size=(120, 40)) as pilot:
            table = app.screen.query_one("#list", DataTable)
            await until(pilot, lambda: table.row_count > 0, what="the servers list")
            await settle(pilot)
            assert row_keys(table) == [live]
            assert note(app) == ("1 stopped server hidden (ended over 0s ago) · a shows them")
            await pilot.press("a")
            await settle(pilot)
            assert sorted(row_keys(table)) == sorted([live, ended])
            assert note(app) == "1 stopped over 0s ago shown · a hides them"
            await pilot.press("a")
            await settle(pilot)
            assert row_keys(table) == [live]

            # The dashboard's strip folds them too, and says so.
            await pilot.press("d")
            await settle(pilot)
            strip = app.screen.query_one("#strip").text.plain  # type: ignore[attr-defined]
            assert live in strip
            assert ended not in strip
            assert "1 stopped server hidden (ended over 0s ago) · a shows them" in strip
            await pilot.press("a")
            await settle(pilot)
            strip = app.screen.query_one("#strip").text.plain  # type: ignore[attr-defined]
            assert ended in strip
            await pilot.press("s")
            await settle(pilot)

            # enter on the (focused) list opens the selected server's log.
            table.focus()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, LogsScreen), what="the Logs mode")
            screen = app.screen
            assert isinstance(screen, LogsScreen)
            assert screen.server_id == live
    finally:
        dd("down", "--all", "--grace", "2")


async def test_enter_on_a_servers_row_opens_its_log(scene_backend: SceneBackend):
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#list", DataTable)
        assert app.screen.focused is table
        await pilot.press("down")
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, LogsScreen)
        assert screen.server_id == B
        assert any("ready to roll" in line for line in screen.lines)


async def test_a_replay_folds_nothing(scene_backend: SceneBackend):
    """The scene's failed server ended days ago on the wall clock, and still shows."""
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert row_keys(app.screen.query_one("#list", DataTable)) == [A, B, C]
        assert not app.screen.query_one("#folded", Static).has_class("shown")


def _view(server_id: str, state: str, launched: float | None, uptime: float | None) -> ServerView:
    return ServerView(
        id=server_id,
        profile="p",
        layout="tp1",
        variant="off",
        state=state,
        port=None,
        gpus=(0,),
        launched_wall=launched,
        uptime_s=uptime,
    )


def test_split_folded_by_end_time():
    now = 10_000.0
    servers = [
        _view("live", "ready", 0.0, 10_000.0),
        _view("old", "stopped", 0.0, 100.0),  # ended at 100
        _view("recent", "stopped", 9_000.0, 500.0),  # ended at 9,500
        _view("failed-old", "failed", 1_000.0, None),  # never ran: ended at its launch
        _view("no-launch", "stopped", None, None),  # unknown end: shown
    ]
    assert ended_wall(servers[0]) is None
    assert ended_wall(servers[1]) == 100.0
    shown, folded = split_folded(servers, now, 3600)
    assert [s.id for s in shown] == ["live", "recent", "no-launch"]
    assert [s.id for s in folded] == ["old", "failed-old"]
    assert folded_note(3, 3600, shown=False) == (
        "3 stopped servers hidden (ended over 1h ago) · a shows them"
    )
    assert age_text(5400) == "90m"
    assert age_text(172800) == "2d"
    assert age_text(45) == "45s"
    shown, folded = split_folded(servers, None, 3600)
    assert folded == []
    assert len(shown) == 5


async def test_x_reads_forget_on_an_ended_server(scene_backend: SceneBackend):
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.screen.active_bindings["x"].binding.description == "Stop"
        await pilot.press("down", "down")  # the failed server
        await settle(pilot)
        assert app.screen.active_bindings["x"].binding.description == "Forget"
        await pilot.press("up")
        await settle(pilot)
        assert app.screen.active_bindings["x"].binding.description == "Stop"


async def test_a_damaged_config_is_said_and_the_default_age_used(
    scene_backend: SceneBackend, isolated_dirs: Path
):
    folder = isolated_dirs / "xdg_config_home" / "ddconsole"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text('[console]\nfold_stopped_after = "soon"\n')
    app = ConsoleApp(scene_backend, mode="servers")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert screen.fold_after_s == 3600  # type: ignore[attr-defined]
        activity = screen.query_one("#activity", RichLog)
        said = " ".join("".join(s.text for s in line) for line in activity.lines)
        assert "console.fold_stopped_after" in said
        assert "folding stopped servers after 1h" in said
