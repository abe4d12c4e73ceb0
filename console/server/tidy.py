"""Stopped servers that ended long ago: folded away from lists, and pruned on request.

A server counts as ended once its state is terminal (stopped or failed) and nothing of it
runs any more (no orphans). Its end is the waiter's exit record; without one (the waiter
was killed too), the stop request, else the log's last write, else the launch.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from console.core.errors import StateError
from console.server.manager import ServerManager
from console.server.status import ServerStatus


def ended_wall(status: ServerStatus) -> float | None:
    """Wall-clock time the server ended; None while it runs (or has processes left).
    The rule is `ServerStatus.ended_wall`, which the status JSON carries to the TUI too."""
    return status.ended_wall()


def is_folded(status: ServerStatus, older_than_s: float, now: float | None = None) -> bool:
    """True for an ended server whose end is more than `older_than_s` ago."""
    ended = ended_wall(status)
    current = time.time() if now is None else now
    return ended is not None and current - ended > older_than_s


def split_folded(
    statuses: Iterable[ServerStatus], older_than_s: float, now: float | None = None
) -> tuple[list[ServerStatus], list[ServerStatus]]:
    """(shown, folded): the servers a list shows by default and the ones it hides."""
    shown: list[ServerStatus] = []
    folded: list[ServerStatus] = []
    for status in statuses:
        (folded if is_folded(status, older_than_s, now) else shown).append(status)
    return shown, folded


def log_files(manager: ServerManager, status: ServerStatus) -> list[Path]:
    """The server's log files in the state dir's logs/: the record's own and those of its
    earlier launches under the same id (`ID.YYYYMMDD-HHMMSS.log`, left by restarts). A log
    path outside logs/ is never touched."""
    folder = manager.paths.logs
    pattern = re.compile(rf"^{re.escape(status.id)}\.\d{{8}}-\d{{6}}\.log$")
    found: set[Path] = set()
    try:
        found.update(p for p in folder.iterdir() if pattern.match(p.name) and p.is_file())
    except OSError:
        pass
    own = Path(status.record.log_path)
    if own.parent == folder and own.is_file():
        found.add(own)
    return sorted(found)


@dataclass
class PruneResult:
    id: str
    state: str
    ended_wall: float | None
    logs: list[str] = field(default_factory=list)
    result: str = "removed"
    """`removed`, `would remove` (dry run) or `kept` (it was running again, or unremovable)."""
    reason: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "state": self.state,
            "ended_wall": self.ended_wall,
            "logs": self.logs,
            "result": self.result,
            "reason": self.reason,
        }


def prune(manager: ServerManager, server_id: str) -> PruneResult:
    """Remove an ended server's record and its logs. Its status is read again first: a
    server that runs again (a restart since it was listed) is kept, never removed."""
    status = manager.status(server_id, probe=False)
    logs = log_files(manager, status)
    result = PruneResult(status.id, status.state.value, ended_wall(status), [str(p) for p in logs])
    if result.ended_wall is None:
        result.result = "kept"
        result.reason = f"it is {status.state.value}" + (
            f" with processes left ({', '.join(map(str, status.orphans))})"
            if status.orphans
            else ""
        )
        return result
    try:
        manager.forget(server_id)
    except StateError as exc:
        result.result = "kept"
        result.reason = exc.message
        return result
    for path in logs:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            result.reason = f"log {path.name} not removed ({exc.strerror or exc})"
    return result
