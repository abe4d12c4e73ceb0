"""Watch servers: poll managed ones cheaply and often, probe readiness less often, scan for
external ones on their own cadence, and keep every change until it is taken."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from console.server.external import ExternalScanner, ExternalServer
from console.server.manager import ServerManager
from console.server.status import ServerState, ServerStatus

MAX_PENDING = 1000
"""Changes kept for `take_changes` at most (the oldest go first)."""


@dataclass(frozen=True)
class StateChange:
    server_id: str
    before: str | None
    """A managed server's ServerState, or an external server's state word (`running`:
    found, readiness unknown), None when new."""
    after: str
    reason: str | None
    seen_monotonic: float


class ServerWatcher:
    """Each `poll()` reads state files and /proc (cheap); every `probe_every`th also asks
    `/ready` (an HTTP round trip per live server). Orphan scans run every `orphan_every`th.
    `scan_externals()` scans the host for SGLang servers ddconsole did not start and probes
    them (`external`): a separate call, so a slow or hung external server never holds up
    the managed servers' polls. The two may run on different threads; every change either
    finds waits in `take_changes()`, so a poll whose caller gave up on it loses nothing."""

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
        self._pending: list[StateChange] = []
        self._lock = threading.Lock()

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
        self._keep(changes)
        return changes

    def scan_externals(self, holders: Mapping[int, set[int]] | None = None) -> list[StateChange]:
        """Scan and probe the external servers now (`holders`: see ExternalScanner.scan)."""
        if self.externals is None:
            return []
        before = {e.id: e for e in self.external}
        self.external = self.externals.scan(probe=True, holders=holders)
        now = time.monotonic()
        changes = []
        for server in self.external:
            previous = before.pop(server.id, None)
            if previous is None or previous.state != server.state:
                changes.append(
                    StateChange(
                        server.id,
                        previous.state if previous else None,
                        server.state,
                        server.reason,
                        now,
                    )
                )
        for gone in before.values():
            changes.append(
                StateChange(gone.id, gone.state, ServerState.STOPPED, "external: ended", now)
            )
        self._keep(changes)
        return changes

    def _keep(self, changes: list[StateChange]) -> None:
        if changes:
            with self._lock:
                self._pending = (self._pending + changes)[-MAX_PENDING:]

    def take_changes(self) -> list[StateChange]:
        """Every change seen since the last call, oldest first."""
        with self._lock:
            taken, self._pending = self._pending, []
        return taken

    def close(self) -> None:
        if self.externals is not None:
            self.externals.close()
