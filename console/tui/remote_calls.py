"""The lifecycle calls to other hosts still running: started by the Servers screen, read by
the app before it quits (quitting closes the SSH connection that runs them, which ends a
restart or stop there midway)."""

from __future__ import annotations

from typing import Any

from textual.app import App


class RemoteCalls:
    """(host, server id) -> the verb a remote call is running on that server."""

    def __init__(self) -> None:
        self._running: dict[tuple[str, str], str] = {}

    def start(self, host: str, server_id: str, verb: str) -> None:
        self._running[(host, server_id)] = verb

    def end(self, host: str, server_id: str) -> None:
        self._running.pop((host, server_id), None)

    def verb(self, host: str, server_id: str) -> str | None:
        """The verb running on that server, None when none is."""
        return self._running.get((host, server_id))

    def described(self) -> list[str]:
        """Each running call as `restart ID on HOST`, oldest first."""
        return [f"{verb} {server} on {host}" for (host, server), verb in self._running.items()]


def remote_calls(app: App[Any]) -> RemoteCalls:
    """The app's one registry, made on first use (screens and the app share it)."""
    calls = getattr(app, "_ddconsole_remote_calls", None)
    if not isinstance(calls, RemoteCalls):
        calls = RemoteCalls()
        app._ddconsole_remote_calls = calls  # type: ignore[attr-defined]
    return calls
