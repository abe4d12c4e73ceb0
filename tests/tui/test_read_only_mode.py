"""Read-only mode (`--read-only`, `read_only = true`): everything shows, every action that
starts, stops or changes work is refused with a notice saying why and how to leave it, from
its key and from the command palette, and the live backend refuses it again."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import pytest
from textual.binding import Binding
from textual.command import CommandPalette
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Input

from console.cli.cmd_tui import read_only_reason
from console.cli.services import Services
from console.tui.app import GLOBAL_ACTIONS, MODE_KEYS, MODE_SCREENS, ConsoleApp
from console.tui.backend import ActionRefused
from console.tui.live import LiveBackend
from console.tui.read_only import CHANGING_ACTIONS
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.modals import HelpScreen
from console.tui.widgets.topbar import TopBar
from tests.tui.conftest import settle, until
from tests.tui.made_servers import running_and_ended

PALETTE = tuple(title for title, *_ in GLOBAL_ACTIONS)
"""The palette's global entries: every one of them acts."""


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


VIEW_ACTIONS = frozenset(
    {
        # find and sort (every table), the stopped-servers fold, opening a log
        "find",
        "sort",
        "sort_reverse",
        "clear_filter",
        "toggle_ended",
        "logs",
        # Dashboard: which server's charts, the zoom
        "focus_next_server",
        "zoom",
        # Fleet: a host's servers, reading a stale host again now (nothing changes there)
        "open_host",
        "retry_host",
        # Runs: compare runs, page through a run's plots, read the list again
        "compare",
        "plots",
        "reload",
        # Logs: which server, follow, search, errors, wrap
        "cycle",
        "follow",
        "search",
        "next_match",
        "clear_search",
        "next_error",
        "failure_line",
        "wrap",
    }
)
"""Screen actions that only change what is shown; every other action a mode screen binds
must be refused in a read-only console."""


MODE_KEY = {mode: key for key, mode, _, _ in MODE_KEYS}


def action_name(action: str) -> str:
    return action.split("(", 1)[0]


def mode_bindings() -> dict[str, list[Binding]]:
    """Each mode's screen bindings that are not pure view keys, from its BINDINGS (Textual's
    own screen keys, which a screen without BINDINGS inherits, left out)."""
    found: dict[str, list[Binding]] = {}
    for mode, (module, name) in MODE_SCREENS.items():
        screen_class = getattr(importlib.import_module(f"console.tui.screens.{module}"), name)
        found[mode] = [
            b
            for b in screen_class.BINDINGS
            if isinstance(b, Binding)
            and b not in Screen.BINDINGS
            and action_name(b.action) not in VIEW_ACTIONS
        ]
    return found


def test_every_changing_binding_is_a_changing_action() -> None:
    """A new key that is neither a view key nor in CHANGING_ACTIONS fails here first."""
    for mode, bindings in mode_bindings().items():
        for binding in bindings:
            assert action_name(binding.action) in CHANGING_ACTIONS, (mode, binding.action)
    assert {"forget", "stop", "stop_run"} <= CHANGING_ACTIONS


def state(backend: LiveBackend) -> tuple[object, ...]:
    """What an action would change: the servers (id, state) and the runs."""
    servers = tuple((s.id, s.state) for s in backend.servers())
    return servers, tuple(r.run_id for r in backend.runs())


async def test_every_action_key_and_palette_entry_is_refused_with_a_notice() -> None:
    """With a running and an ended server listed, every changing key (on each server row
    where the screen has a list of them: `x` is Stop on one and Forget on the other) and
    every palette entry that acts is refused with the read-only reason, and nothing moves."""
    reason = "read-only (--read-only): actions are refused; to act, start it without"
    services = Services.create(demo=True)
    with running_and_ended(services) as (running, ended):
        backend = read_only_backend(reason)
        app = ConsoleApp(backend)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: len(backend.servers()) == 2, 20, "both servers")
            await settle(pilot)
            before = state(backend)
            assert {s.id: s.live for s in backend.servers()} == {running: True, ended: False}
            assert "READ-ONLY" in str(app.screen.query_one(TopBar).render())
            for mode, bindings in mode_bindings().items():
                await pilot.press(MODE_KEY[mode])
                await settle(pilot)
                assert app.current_mode == mode
                rows = [0]
                if mode == "servers":
                    rows = list(range(app.screen.query_one("#list", DataTable).row_count))
                    assert len(rows) == 2
                for row in rows:
                    if mode == "servers":
                        app.screen.query_one("#list", DataTable).move_cursor(row=row)
                        await settle(pilot)
                    for binding in bindings:
                        key = binding.key.split(",")[0]
                        count = len(notices(app))
                        await pilot.press(key)
                        await settle(pilot)
                        what = f"{mode} {key} ({binding.action}) on row {row}"
                        assert not isinstance(app.screen, ModalScreen), f"{what} opened a dialog"
                        assert notices(app)[count:] == [reason], what

            # Every palette entry of every mode screen that acts (its bindings' entries, run
            # by the callbacks the palette runs), with each server selected; the global ones
            # (the same on every screen) are typed into the palette below.
            for mode in MODE_SCREENS:
                await pilot.press(MODE_KEY[mode])
                await settle(pilot)
                screen = app.screen
                assert isinstance(screen, ConsoleScreen)
                acting = {
                    f"{b.description} ({b.key_display or b.key})"
                    for b in mode_bindings()[mode]
                    if b.show
                }
                titles = {c.title for c in app.get_system_commands(app.screen)}
                assert acting | set(PALETTE) <= titles, mode
                for row in [0, 1] if mode == "servers" else [0]:
                    if mode == "servers":
                        screen.query_one("#list", DataTable).move_cursor(row=row)
                        await settle(pilot)
                    commands = [c for c in app.get_system_commands(app.screen) if c.title in acting]
                    for command in commands:
                        count = len(notices(app))
                        command.callback()

                        def refused(count: int = count) -> bool:
                            return len(notices(app)) > count

                        await until(pilot, refused, 10, f"palette {command.title}")
                        await settle(pilot)
                        what = f"palette {command.title} on {mode} row {row}"
                        assert not isinstance(app.screen, ModalScreen), what
                        assert notices(app)[count:] == [reason], what
            # And the global entries through the palette itself, typed as a user would.
            for title in PALETTE:
                count = len(notices(app))
                await pilot.press("ctrl+p")
                await until(pilot, lambda: isinstance(app.screen, CommandPalette), 10, "palette")
                app.screen.query_one(Input).value = title
                await pilot.pause(0.3)
                await pilot.press("enter")

                def refused_typed(count: int = count) -> bool:
                    return len(notices(app)) > count

                await until(pilot, refused_typed, 10, f"palette {title}")
                await settle(pilot)
                assert not isinstance(app.screen, ModalScreen), f"palette {title} opened a dialog"
                assert notices(app)[count:] == [reason], title
            # The help says why, and the quit note names the demo verbs.
            await pilot.press("question_mark")
            await settle(pilot)
            help_screen = app.screen
            assert isinstance(help_screen, HelpScreen)
            assert help_screen.note.startswith(reason)
            assert "`ddconsole ps --demo`" in help_screen.note
            await pilot.press("escape")
            await settle(pilot)
            # Nothing changed: no server launched, stopped or forgotten, no run started.
            assert state(backend) == before
            assert backend.runs() == []
            assert sorted(services.manager().records.ids()) == sorted([running, ended])
