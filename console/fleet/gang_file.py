"""The console host's file of a gang whose nodes run on other hosts: `STATE/gangs/ID.json`.

Each node is a managed server on its own host (its record there); this file is what the
console host that ran `up` knows: which node runs where, the request that started it
(variant, port, GPUs), the supervisor's pid, whether a stop was asked for and why the gang
ended. `down ID` here reads it to stop every node, `restart ID` to stop and start them again.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from console.core.errors import StateError, UsageError
from console.core.jsonio import atomic_write_json
from console.core.paths import StatePaths

WATCH_MODULE = "console.fleet.gang_watch"


@dataclass
class GangNode:
    rank: int
    host: str
    id: str


@dataclass
class GangFile:
    id: str
    profile: str
    layout: str
    demo: bool
    nodes: list[GangNode]
    created_wall: float
    head_url: str = ""
    watcher_pid: int | None = None
    stop_requested_wall: float | None = None
    stop_reason: str | None = None
    ended_wall: float | None = None
    failure: str | None = None
    """Why the gang ended without a stop request (`node 1 exited 137 (SIGKILL); ...`)."""
    notes: list[str] = field(default_factory=list)
    variant: str | None = None
    """The request's variant; None in a file written before the request was kept (`restart`
    cannot start such a gang again)."""
    port: int | None = None
    """The head's `--port` as asked for (None: the profile's, or the next free one)."""
    gpus: list[int] | None = None
    """Every node's `--gpus` as asked for (None: the layout's)."""

    @property
    def hosts(self) -> list[str]:
        """The nodes' hosts, each once, in rank order."""
        return list(dict.fromkeys(node.host for node in self.nodes))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GangFile:
        nodes = [GangNode(int(n["rank"]), str(n["host"]), str(n["id"])) for n in data["nodes"]]
        return cls(
            id=str(data["id"]),
            profile=str(data["profile"]),
            layout=str(data["layout"]),
            demo=bool(data["demo"]),
            nodes=nodes,
            created_wall=float(data["created_wall"]),
            head_url=str(data.get("head_url", "")),
            watcher_pid=data.get("watcher_pid"),
            stop_requested_wall=data.get("stop_requested_wall"),
            stop_reason=data.get("stop_reason"),
            ended_wall=data.get("ended_wall"),
            failure=data.get("failure"),
            notes=[str(n) for n in data.get("notes", [])],
            variant=None if data.get("variant") is None else str(data["variant"]),
            port=None if data.get("port") is None else int(data["port"]),
            gpus=None if data.get("gpus") is None else [int(g) for g in data["gpus"]],
        )


def gangs_dir(paths: StatePaths) -> Path:
    return paths.root / "gangs"


def gang_path(paths: StatePaths, gang_id: str) -> Path:
    return gangs_dir(paths) / f"{gang_id}.json"


def save(path: Path, gang: GangFile) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, gang.to_json())


def load(path: Path) -> GangFile:
    try:
        return GangFile.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StateError(f"{path}: cannot read this multi-node gang's file ({exc})") from None


def gang_ids(paths: StatePaths) -> list[str]:
    try:
        return sorted(p.stem for p in gangs_dir(paths).glob("*.json"))
    except OSError:
        return []


def find(paths: StatePaths, text: str) -> Path | None:
    """The file of the gang named `text` (its id or a unique prefix); None when no gang
    here has that name (the name may be a server's)."""
    ids = gang_ids(paths)
    if text in ids:
        return gang_path(paths, text)
    matches = [i for i in ids if i.startswith(text)]
    if len(matches) > 1:
        raise UsageError(f"ambiguous multi-node server {text!r}: {', '.join(matches)}")
    return gang_path(paths, matches[0]) if matches else None


def _same_file(arg: bytes, pid: int, path: Path) -> bool:
    """Whether the supervisor's argument `arg` names the file `path` (a relative one taken
    from the supervisor's own working folder)."""
    try:
        named = os.fsdecode(arg)
        if not os.path.isabs(named):
            named = os.path.join(os.readlink(f"/proc/{pid}/cwd"), named)
        return os.path.realpath(named) == os.path.realpath(path)
    except (OSError, ValueError):
        return False


def watcher_alive(pid: int | None, path: Path | None = None) -> bool:
    """Whether `pid` is still a gang supervisor (its command line names the module) and,
    given `path`, the one of the gang whose file that is: after the pid was reused by
    another gang's supervisor, that one is not ours to stop."""
    if not pid or pid <= 1:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return False
    if WATCH_MODULE.encode() not in argv:
        return False
    if path is None:
        return True
    after = argv[argv.index(WATCH_MODULE.encode()) + 1 :]
    return any(_same_file(arg, pid, path) for arg in after if arg)


def end_watcher(pid: int | None, path: Path) -> None:
    """SIGTERM the supervisor when it is still the one of the gang whose file is `path`."""
    import signal

    if watcher_alive(pid, path):
        assert pid is not None
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
