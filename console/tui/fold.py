"""Which ended servers are folded away: stopped or failed longer ago than the user's
`fold_stopped_after` (config.toml), so they stop piling up in every list.

Live only: a replay shows its servers as they were recorded, none folded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from console.core.errors import ConsoleError
from console.core.settings import DEFAULT_FOLD_STOPPED_AFTER_S, load_settings
from console.tui.backend import Backend
from console.tui.views import ServerView

ENDED_STATES = ("stopped", "failed")


def fold_after_s() -> tuple[float, str | None]:
    """The user's fold age and, when config.toml cannot be read, why (the default is used)."""
    try:
        return load_settings().fold_stopped_after_s, None
    except ConsoleError as exc:
        return DEFAULT_FOLD_STOPPED_AFTER_S, exc.message


def ended_wall(server: ServerView) -> float | None:
    """When an ended server ended, on the wall clock; None while live. The status's own
    end (exit record, stop request, log's last write: `ddconsole ps`'s rule) where the
    view carries it; for a view without it (a recording from before), launch time plus
    its uptime, or its launch time when it never ran."""
    if server.state not in ENDED_STATES:
        return None
    if server.ended_recorded:
        return server.ended_wall
    if server.launched_wall is None:
        return None
    return server.launched_wall + (server.uptime_s or 0.0)


def split_folded(
    servers: Sequence[ServerView], now_wall: float | None, after_s: float
) -> tuple[list[ServerView], list[ServerView]]:
    """(shown, folded): an ended server whose end is over `after_s` before `now_wall` is
    folded; nothing is when `now_wall` is None (a replay)."""
    shown: list[ServerView] = []
    folded: list[ServerView] = []
    for server in servers:
        end = ended_wall(server)
        if now_wall is not None and end is not None and now_wall - end > after_s:
            folded.append(server)
        else:
            shown.append(server)
    return shown, folded


def wall_clock(backend: Backend) -> Callable[[], float] | None:
    """The clock that ages ended servers: the wall clock live, none in a replay."""
    from console.tui.replay import ReplayBackend  # a replay's module: only to tell it apart

    if backend.replay is not None or isinstance(backend, ReplayBackend):
        return None
    return time.time


def age_text(seconds: float) -> str:
    """`1h`, `90m`, `2d`, `45s`: the fold age as config.toml writes it."""
    whole = round(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size and whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def folded_note(count: int, after_s: float, shown: bool) -> str:
    """`3 stopped servers hidden (ended over 1h ago) · a shows them`, or how to fold again."""
    age = age_text(after_s)
    if shown:
        return f"{count} stopped over {age} ago shown · a hides them"
    noun = "server" if count == 1 else "servers"
    return f"{count} stopped {noun} hidden (ended over {age} ago) · a shows them"
