"""Watch managed servers: poll cheaply and often, probe readiness less often, report changes."""

from __future__ import annotations

import time
from dataclasses import dataclass

from console.server.external import ExternalScanner, ExternalServer
from console.server.manager import ServerManager
from console.server.status import ServerState, ServerStatus


@dataclass(frozen=True)
class StateChange:
    server_id: str
    before: ServerState | None
    after: ServerState
    reason: str | None
    seen_monotonic: float


class ServerWatcher:
    """Each `poll()` reads state files and /proc (cheap); every `probe_every`th also asks
    `/ready` (an HTTP round trip per live server). Orphan scans run every `orphan_every`th.
    With `externals`, every probing poll also scans the host for SGLang servers ddconsole
    did not start and probes them (`external`)."""

    def __init__(
        self,
        manager: ServerManager,
        *,
        probe_every: int = 4,
        orphan_every: int = 20,
        externals: ExternalScanner | None = None,
    ) -> None:
        self.manager = manager
        self.probe_every = max(1, probe_every)
        self.orphan_every = max(1, orphan_every)
        self._polls = 0
        self._last: dict[str, ServerStatus] = {}
        self.problems: list[str] = []
        self.externals = externals
        self.external: list[ExternalServer] = []

    @property
    def current(self) -> list[ServerStatus]:
        return list(self._last.values())

    def poll(self) -> list[StateChange]:
        probe = self._polls % self.probe_every == 0
        orphans = self._polls % self.orphan_every == 0
        self._polls += 1
        statuses, self.problems = self.manager.statuses(probe=probe, orphan_scan=orphans)
        now = time.monotonic()
        changes = []
        fresh: dict[str, ServerStatus] = {}
        for status in statuses:
            previous = self._last.get(status.id)
            if (
                not probe
                and previous is not None
                and status.state is ServerState.READY
                and previous.state is ServerState.UNRESPONSIVE
            ):
                # Without a probe this poll cannot tell; keep what the last probe said.
                status = previous
            if not orphans and previous is not None and previous.orphans and status.state.terminal:
                status = previous
            fresh[status.id] = status
            if previous is None or previous.state is not status.state:
                changes.append(
                    StateChange(
                        status.id,
                        previous.state if previous else None,
                        status.state,
                        status.reason,
                        now,
                    )
                )
        self._last = fresh
        if self.externals is not None and probe:
            changes += self._scan_externals(now)
        return changes

    def _scan_externals(self, now: float) -> list[StateChange]:
        assert self.externals is not None
        before = {e.id: e for e in self.external}
        self.external = self.externals.scan(probe=True)
        changes = []
        for server in self.external:
            previous = before.pop(server.id, None)
            if previous is None or previous.state != server.state:
                changes.append(
                    StateChange(
                        server.id,
                        _state(previous.state) if previous else None,
                        _state(server.state),
                        server.reason,
                        now,
                    )
                )
        for gone in before.values():
            changes.append(
                StateChange(
                    gone.id, _state(gone.state), ServerState.STOPPED, "external: ended", now
                )
            )
        return changes

    def close(self) -> None:
        if self.externals is not None:
            self.externals.close()


def _state(word: str) -> ServerState:
    try:
        return ServerState(word)
    except ValueError:
        return ServerState.READY
