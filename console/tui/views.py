"""What the screens render about a server: plain values, built from live status or a recording.

Screens never reach into process state; a live backend, a replay and a test scene all produce
these from the JSON that `ServerStatus.to_json()` writes, so one code path draws them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from console.bench.results import JsonDict


class FeedNote(NamedTuple):
    """Where the readings come from when it is not this host, for the sources strip."""

    text: str
    ok: bool
    """False when the feed cannot be asked or some of its targets are down."""


LIVE_STATES = ("starting", "loading", "warming", "ready", "unresponsive", "stopping")


@dataclass(frozen=True)
class ServerView:
    id: str
    profile: str
    layout: str
    variant: str
    state: str
    port: int | None
    gpus: tuple[int, ...]
    numa_nodes: tuple[int, ...] = ()
    reason: str | None = None
    phase: str | None = None
    uptime_s: float | None = None
    url: str | None = None
    pid: int | None = None
    log_path: str | None = None
    failure_kind: str | None = None
    failure_excerpt: tuple[str, ...] = ()
    launched_wall: float | None = None
    demo: bool = False
    plan: JsonDict = field(default_factory=dict)
    """The plan as `Plan.to_json()` wrote it: shown (argv, env), never computed on."""
    external: bool = False
    """An SGLang server ddconsole did not start (found by its processes); `numa_nodes` is
    then where its schedulers actually run, and there is no plan or log."""
    model: str | None = None
    scheduler_pids: tuple[int, ...] = ()
    ended_wall: float | None = None
    """When an ended server ended, by the rule `ddconsole ps` folds by (the status JSON's
    `ended_wall`); None while it runs or has processes left, or when not recorded."""
    ended_recorded: bool = False
    """The status JSON carried `ended_wall` (a recording from before it did not): then
    None there means not ended, and the fold does not work the end out itself."""
    gang: tuple[str, ...] = ()
    """A multi-node server's node ids, head first (the head's id names the gang); empty
    for a single-node server."""
    node_rank: int | None = None
    nodes: tuple[str, ...] = ()
    """Each rank's host (`local` or a hosts-file name), by rank."""
    via: str | None = None
    """`prometheus`: a scrape target read through Prometheus (`layout` is its job); the
    console shows it and never acts on it. None: a server on this host."""

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def is_node(self) -> bool:
        """A non-head node of a gang: listed under its head, never on its own."""
        return bool(self.gang) and self.gang[0] != self.id

    @property
    def host(self) -> str:
        """The host this node (or server) runs on."""
        rank = self.node_rank or 0
        return self.nodes[rank] if rank < len(self.nodes) else "local"

    @property
    def label(self) -> str:
        if self.via is not None:
            return f"via {self.via} (job {self.layout})"
        if self.external:
            return f"external {self.layout} {self.model or '?'}"
        return f"{self.profile} {self.layout} {self.variant}"

    @classmethod
    def from_json(cls, data: JsonDict) -> ServerView:
        """Build from `ServerStatus.to_json()` (plus an optional `plan`); tolerant of gaps."""

        def opt_int(value: Any) -> int | None:
            return int(value) if isinstance(value, int | float) else None

        uptime = data.get("uptime_s")
        launched = data.get("launched_wall")
        ended = data.get("ended_wall")
        return cls(
            id=str(data.get("id", "?")),
            profile=str(data.get("profile", "?")),
            layout=str(data.get("layout", "?")),
            variant=str(data.get("variant", "?")),
            state=str(data.get("state", "?")),
            port=opt_int(data.get("port")),
            gpus=tuple(int(g) for g in data.get("gpus") or ()),
            numa_nodes=tuple(int(n) for n in data.get("numa_nodes") or ()),
            reason=data.get("reason"),
            phase=data.get("phase"),
            uptime_s=float(uptime) if isinstance(uptime, int | float) else None,
            url=data.get("url"),
            pid=opt_int(data.get("pid")),
            log_path=data.get("log_path"),
            failure_kind=data.get("failure_kind"),
            failure_excerpt=tuple(str(line) for line in data.get("failure_excerpt") or ()),
            launched_wall=float(launched) if isinstance(launched, int | float) else None,
            demo=bool(data.get("demo", False)),
            plan=dict(data.get("plan") or {}),
            external=bool(data.get("external", False)),
            model=data.get("served_model_name") or data.get("model"),
            scheduler_pids=tuple(int(p) for p in data.get("scheduler_pids") or ()),
            ended_wall=float(ended) if isinstance(ended, int | float) else None,
            ended_recorded="ended_wall" in data,
            gang=tuple(str(n) for n in data.get("gang") or ()),
            node_rank=opt_int(data.get("node_rank")),
            nodes=tuple(str(n) for n in data.get("nodes") or ()),
        )


def gang_nodes(server: ServerView, servers: list[ServerView]) -> list[ServerView]:
    """A gang head's nodes (itself included) by rank, from `servers`; [] for a server that
    is not a gang's head."""
    if not server.gang or server.is_node:
        return []
    members = {s.id: s for s in servers if s.id in server.gang}
    return sorted(members.values(), key=lambda s: s.node_rank or 0)
