"""Errors whose message is written for the user; the CLI prints them without a traceback."""

from __future__ import annotations


class ConsoleError(Exception):
    """A failure the user can act on; `exit_code` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message}\n  hint: {self.hint}"


class UsageError(ConsoleError):
    """Bad command-line input or an unknown name: exit status 2."""

    exit_code = 2


class ProfileError(UsageError):
    """A profile file that cannot be used; names the file and the key path."""

    def __init__(self, path: str, key_path: str, reason: str) -> None:
        location = f"{path}: {key_path}" if key_path else path
        super().__init__(f"{location}: {reason}")
        self.path = path
        self.key_path = key_path
        self.reason = reason


class PlacementError(UsageError):
    """A plan that cannot be placed on this host (missing GPU, bad layout)."""


class StateError(ConsoleError):
    """The state directory or a file in it cannot be used."""


class ServerStartFailed(ConsoleError):
    """A server launched for a benchmark cell failed or never became ready."""


class ServerStoppedByUser(ServerStartFailed):
    """A server launched for a benchmark cell was stopped from outside (`down`, the TUI)
    before it was ready; the campaign stops instead of launching the next cell."""


class StartCancelled(ServerStartFailed):
    """The campaign was stopped (Ctrl-C, SIGTERM, `runs stop`) while a cell's server was
    still loading: that server was stopped, and the cell is interrupted, not failed."""
