"""Screen work that must not end the app: an unexpected error in it is one notice."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from textual.screen import Screen


async def noticed(screen: Screen[Any], work: Awaitable[None], what: str) -> None:
    """Await `work` (say, one host's listing and its drawing); an error it did not expect
    costs that one piece of work, said on `screen` as `what: Error: message`."""
    try:
        await work
    except Exception as exc:  # a bug in one listing or its drawing: not the session
        if screen.is_mounted:
            screen.notify(f"{what}: {type(exc).__name__}: {exc}", severity="error", timeout=10)
