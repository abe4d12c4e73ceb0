"""The files that describe a managed server in the state dir.

`servers/ID.json` is written by the console (plan, ids, stop requests). `ID.spawn.json` and
`ID.exit.json` are written by the waiter process that is the server's parent, so the pid and
the exit status survive the console that launched it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from console.core.errors import StateError
from console.core.jsonio import atomic_write_json, load_json_text
from console.core.paths import StatePaths
from console.core.via_host import ddconsole_command
from console.topology.placement import Plan

SCHEMA_VERSION = 1
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class ServerRecord:
    """What the console knows about a server it launched."""

    id: str
    plan: Plan
    log_path: str
    launched_wall: float
    launched_by_pid: int
    stop_requested_wall: float | None = None
    stop_reason: str | None = None
    stop_requested_by_pid: int | None = None
    """The process that asked for the stop (a campaign tells its own stop from a `down`)."""
    forgotten: bool = False
    ever_ready: bool = False
    notes: list[str] = field(default_factory=list)
    gang: list[str] = field(default_factory=list)
    """A multi-node server's node ids in rank order (the head's first), on every node's
    record; empty for one node."""
    gang_failure: str | None = None
    """Why the gang stopped this node: another node ended (`node 1 exited 137 (SIGKILL)`)."""

    @property
    def is_node(self) -> bool:
        """A non-head node of a gang: it serves no API, the head's record speaks for it."""
        return bool(self.gang) and self.gang[0] != self.id

    @property
    def url(self) -> str:
        host = self.plan.host if self.plan.host not in ("0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.plan.port}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["plan"] = self.plan.to_json()
        data["schema_version"] = SCHEMA_VERSION
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerRecord:
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"schema version {version!r}, this ddconsole reads {SCHEMA_VERSION}")
        return cls(
            id=str(data["id"]),
            plan=Plan.from_json(data["plan"]),
            log_path=str(data["log_path"]),
            launched_wall=float(data["launched_wall"]),
            launched_by_pid=int(data["launched_by_pid"]),
            stop_requested_wall=data.get("stop_requested_wall"),
            stop_reason=data.get("stop_reason"),
            stop_requested_by_pid=_opt_pid(data.get("stop_requested_by_pid")),
            forgotten=bool(data.get("forgotten", False)),
            ever_ready=bool(data.get("ever_ready", False)),
            notes=[str(n) for n in data.get("notes", [])],
            gang=[str(n) for n in data.get("gang", [])],
            gang_failure=data.get("gang_failure"),
        )


@dataclass(frozen=True)
class SpawnInfo:
    pid: int
    start_ticks: int
    waiter_pid: int
    spawned_wall: float


@dataclass(frozen=True)
class ExitInfo:
    returncode: int
    ended_wall: float

    @property
    def signal_number(self) -> int | None:
        return -self.returncode if self.returncode < 0 else None


class Records:
    """Reads and writes the record files of one state dir."""

    def __init__(self, paths: StatePaths) -> None:
        self.paths = paths
        # Parsed files by path, valid while (inode, size, mtime) stays: a watcher reads
        # every record several times a second and they rarely change.
        self._parsed: dict[Path, tuple[tuple[int, int, int], Any]] = {}

    def _cached(self, path: Path, parse: Any) -> Any:
        """`parse(path)` once per version of the file (atomic writes replace the inode)."""
        info = path.stat()
        key = (info.st_ino, info.st_size, info.st_mtime_ns)
        hit = self._parsed.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        value = parse(path)
        self._parsed[path] = (key, value)
        return value

    def record_path(self, server_id: str) -> Path:
        return self.paths.servers / f"{server_id}.json"

    def spawn_path(self, server_id: str) -> Path:
        return self.paths.servers / f"{server_id}.spawn.json"

    def exit_path(self, server_id: str) -> Path:
        return self.paths.servers / f"{server_id}.exit.json"

    def ids(self) -> list[str]:
        try:
            names = sorted(p.name for p in self.paths.servers.glob("*.json"))
        except OSError:
            return []
        return [n[:-5] for n in names if not n.endswith((".spawn.json", ".exit.json"))]

    def save(self, record: ServerRecord) -> None:
        atomic_write_json(self.record_path(record.id), record.to_json())

    def load(self, server_id: str) -> ServerRecord:
        path = self.record_path(server_id)

        def parse(target: Path) -> ServerRecord:
            data = load_json_text(target.read_bytes().decode("utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            return ServerRecord.from_json(data)

        try:
            # A copy: callers change records (then save them) and must not share one.
            cached: ServerRecord = self._cached(path, parse)
            return replace(cached, notes=list(cached.notes), gang=list(cached.gang))
        except FileNotFoundError:
            raise StateError(f"no server {server_id!r}") from None
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
            raise StateError(
                f"{path}: unreadable state file ({type(exc).__name__}: {exc})",
                hint=f"`{ddconsole_command()} down {server_id}` removes it",
            ) from None

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] | None = self._cached(path, _read_json)
        except OSError:
            return None
        return data

    def spawn(self, server_id: str) -> SpawnInfo | None:
        data = self._read(self.spawn_path(server_id))
        if data is None:
            return None
        try:
            return SpawnInfo(
                int(data["pid"]),
                int(data["start_ticks"]),
                int(data["waiter_pid"]),
                float(data["spawned_wall"]),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def spawn_problem(self, server_id: str) -> str | None:
        """Why `ID.spawn.json` exists but names no process (the waiter writes it atomically,
        so this is damage, not a write in progress); None when absent or readable."""
        path = self.spawn_path(server_id)
        if not path.exists() or self.spawn(server_id) is not None:
            return None
        return f"unreadable spawn record {path.name} (its pid is unknown)"

    def exit(self, server_id: str) -> ExitInfo | None:
        data = self._read(self.exit_path(server_id))
        if data is None:
            return None
        try:
            return ExitInfo(int(data["returncode"]), float(data["ended_wall"]))
        except (KeyError, TypeError, ValueError):
            return None

    def remove(self, server_id: str) -> None:
        for path in (
            self.record_path(server_id),
            self.spawn_path(server_id),
            self.exit_path(server_id),
        ):
            try:
                path.unlink()
            except FileNotFoundError:
                pass


def _opt_pid(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = load_json_text(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
