"""Read-only mode (`--read-only`, `read_only = true`): everything shows, every action that
starts, stops or changes work is refused with a notice saying why and how to leave it, from
its key and from the command palette, and the live backend refuses it again."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.screen import ModalScreen
from textual.widgets import Input

from console.cli.cmd_tui import read_only_reason
from console.cli.services import Services
from console.tui.app import ConsoleApp
from console.tui.backend import ActionRefused
from console.tui.live import LiveBackend
from console.tui.read_only import CHANGING_ACTIONS
from console.tui.screens.modals import HelpScreen
from console.tui.widgets.topbar import TopBar
from tests.tui.conftest import settle, until

SCREEN_KEYS = {"servers": ("n", "x", "R", "w"), "bench": ("g", "c", "p", "D", "x")}
PALETTE = (
    "Launch a server",
    "Switch a server",
    "Stop a server",
    "Benchmark a server",
    "Run a campaign",
    "Stop a run",
)


def read_only_backend(reason: str) -> LiveBackend:
    backend = Services.create(demo=True).live_backend(recordings=None)
    backend.make_read_only(reason)
    return backend


def notices(app: ConsoleApp) -> list[str]:
    return list(app.notices)


def args(**values: object) -> argparse.Namespace:
    return argparse.Namespace(**{"demo": True, "read_only": False, **values})


def test_the_flag_and_the_setting_each_say_how_to_leave(isolated_dirs: Path) -> None:
    from console.cli.parser import build_parser

    assert build_parser().parse_args(["--demo", "--read-only"]).read_only is True
    assert build_parser().parse_args(["--demo"]).read_only is False
    assert read_only_reason(args()) is None
    flag = read_only_reason(args(read_only=True))
    assert flag is not None
    assert "--read-only" in flag
    assert "`ddconsole --demo` without --read-only" in flag
    config = isolated_dirs / "xdg_config_home" / "ddconsole" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[console]\nread_only = true\n")
    setting = read_only_reason(args())
    assert setting is not None
    assert f"read_only = true in {config}" in setting
    assert "set read_only = false there" in setting


def test_the_live_backend_refuses_every_action_itself() -> None:
    backend = read_only_backend("read-only (--read-only): test")
    calls = [
        lambda: backend.plan("qwen3.6-27b", "tp1", "off"),
        lambda: backend.stop_server("qwen3.6-27b-tp1-1", print),
        lambda: backend.restart("qwen3.6-27b-tp1-1", print),
        lambda: backend.demo_campaign(),
    ]
    for call in calls:
        with pytest.raises(ActionRefused, match="--read-only"):
            call()
    assert not backend.runs_root.exists() or not any(backend.runs_root.iterdir())


async def test_every_action_key_and_palette_entry_is_refused_with_a_notice() -> None:
    reason = "read-only (--read-only): actions are refused; to act, start it without"
    backend = read_only_backend(reason)
    app = ConsoleApp(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "READ-ONLY" in str(app.screen.query_one(TopBar).render())
        for mode, keys in SCREEN_KEYS.items():
            await pilot.press(mode[0])
            await settle(pilot)
            assert app.current_mode == mode
            for key in keys:
                before = len(notices(app))
                await pilot.press(key)
                await settle(pilot)
                assert not isinstance(app.screen, ModalScreen), f"{mode} {key} opened a dialog"
                assert notices(app)[before:] == [reason], f"{mode} {key}"
        for title in PALETTE:
            before = len(notices(app))
            await pilot.press("ctrl+p")
            await until(pilot, lambda: isinstance(app.screen, CommandPalette), 10, "palette")
            app.screen.query_one(Input).value = title
            await pilot.pause(0.3)
            await pilot.press("enter")

            def refused(count: int = before) -> bool:
                return len(notices(app)) > count

            await until(pilot, refused, 10, f"palette {title}")
            await settle(pilot)
            assert not isinstance(app.screen, ModalScreen), f"palette {title} opened a dialog"
            assert notices(app)[before:] == [reason], title
        # The help says why, and the quit note names the demo verbs.
        await pilot.press("question_mark")
        await settle(pilot)
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        assert help_screen.note.startswith(reason)
        assert "`ddconsole ps --demo`" in help_screen.note
        await pilot.press("escape")
        # Nothing changed: no server launched, no run started.
        assert backend.servers() == []
        assert backend.runs() == []
        assert {"launch", "stop", "bench", "campaign", "stop_run"} <= CHANGING_ACTIONS
