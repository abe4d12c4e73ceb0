"""Read-only consoles (`--read-only`, `read_only = true`, replays): what is refused and why.

Every action that starts, stops or changes work is named here; the app refuses them all
in one place before any screen sees the key, and the live backend refuses them again, so
no path (a key, the palette, a dialog) slips through.
"""

from __future__ import annotations

from pathlib import Path

from console.tui.backend import Backend

CHANGING_ACTIONS = frozenset(
    {
        "launch",
        "stop",
        "forget",
        "restart",
        "switch",
        "bench",
        "campaign",
        "cells",
        "demo",
        "stop_run",
    }
)
"""Screen and app actions that start, stop or change servers and runs."""
REPLAY_NOTICE = "read-only: this is a replay of a recording; nothing on the host changes from here"


def read_only_reason(*, flag: bool, config: Path | None, demo: bool) -> str:
    """The notice a live read-only console gives: why, and how to act again."""
    command = "ddconsole --demo" if demo else "ddconsole"
    if flag:
        return (
            "read-only (--read-only): actions are refused; to act, start "
            f"`{command}` without --read-only"
        )
    where = str(config) if config is not None else "config.toml"
    return (
        f"read-only (read_only = true in {where}): actions are refused; to act, set "
        f"read_only = false there and start `{command}` again"
    )


def refusal(backend: Backend) -> str:
    """Why this backend refuses actions (a live read-only backend says so itself;
    replays and snapshots are the past)."""
    reason = getattr(backend, "read_only_reason", None)
    return reason if isinstance(reason, str) and reason else REPLAY_NOTICE


def live_read_only(backend: Backend) -> bool:
    """Read-only by the user's choice (the READ-ONLY badge), not a replay or a snapshot."""
    return backend.read_only and isinstance(getattr(backend, "read_only_reason", None), str)
