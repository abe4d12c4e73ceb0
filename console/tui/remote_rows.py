"""The Servers screen's rows for the other hosts of the fleet: a row per host (`alpha  up`,
`alpha  stale: reason`, `alpha  connecting`) followed by the servers of its latest reading
(docs/metrics.schema.json's `server`), and the detail pane of one of them.

Pure: built from a HostSummary and the host's reading, no widgets and no I/O. The reading
comes from another machine, possibly another ddconsole version, so every field is checked
and a missing or malformed one reads as unknown. Keys are prefixed with the host, so a
remote server never shares a key with a local one of the same id.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from console.core.units import format_duration, format_index_set
from console.fleet.hosts import LOCAL
from console.fleet.summary import HostSummary
from console.tui.widgets.finder import FindRow, sort_value
from console.tui.widgets.server_strip import STATE_STYLES

HOST_KEY = "host:"
"""Row keys of the host rows."""
REMOTE_KEY = "remote:"
"""Row keys of a remote server: `remote:HOST/ID` (host names hold no `/`)."""
HOST_STYLES = {"up": "bold green", "connecting": "yellow", "stale": "bold yellow"}
REASON_SHOWN = 48
"""The most of a stale host's reason its row shows (the detail pane has all of it)."""
REASON_SHOWN_NARROW = 20
"""The same under 110 columns, where the ID column must leave room for the others."""
LIVE_STATES = frozenset({"starting", "loading", "warming", "ready", "stopping", "unresponsive"})


@dataclass(frozen=True)
class RemoteServer:
    """One server of another host as its latest reading has it (None: not in the reading)."""

    host: str
    id: str
    state: str
    live: bool
    profile: str | None
    layout: str | None
    variant: str | None
    url: str | None
    port: int | None
    gpus: tuple[int, ...]
    tok_s: float | None
    external: bool
    source_state: str | None
    """The state of the host's telemetry source for this server (ok, degraded, ...)."""
    source_reason: str | None
    reason: str | None = None
    """Why a server that ended ended, as `ps` there says it."""
    ended_wall: float | None = None
    """When a server that ended ended (that host's wall clock); None while live."""
    numa_nodes: tuple[int, ...] = ()
    pid: int | None = None
    uptime_s: float | None = None
    """Seconds it had run at the reading (None: not running, or not said)."""
    log_path: str | None = None
    """Its log on that host."""

    @property
    def key(self) -> str:
        return server_key(self.host, self.id)

    @property
    def ended(self) -> bool:
        return not self.live


@dataclass(frozen=True)
class RemoteHost:
    """Another host of the fleet and its servers; a stale host keeps its last reading."""

    name: str
    target: str
    state: str
    """"up", "connecting" (no reading yet) or "stale" (see `reason`)."""
    reason: str | None
    age_s: float | None
    servers: tuple[RemoteServer, ...]

    @property
    def key(self) -> str:
        return HOST_KEY + self.name

    @property
    def up(self) -> bool:
        return self.state == "up"

    def server(self, server_id: str) -> RemoteServer | None:
        return next((s for s in self.servers if s.id == server_id), None)


def server_key(host: str, server_id: str) -> str:
    return f"{REMOTE_KEY}{host}/{server_id}"


def parse_key(key: str) -> tuple[str, str | None] | None:
    """(host, server id) of a remote server's key, (host, None) of a host row's, None for a
    local row's key."""
    if key.startswith(HOST_KEY):
        return key.removeprefix(HOST_KEY), None
    if key.startswith(REMOTE_KEY):
        host, _, server_id = key.removeprefix(REMOTE_KEY).partition("/")
        return host, server_id
    return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _port(url: str | None) -> int | None:
    if url is None:
        return None
    try:
        return urlsplit(url).port
    except ValueError:
        return None


def _server(host: str, raw: object) -> RemoteServer | None:
    if not isinstance(raw, dict) or not _text(raw.get("id")):
        return None
    server_id = str(raw["id"])
    state = _text(raw.get("state")) or "unknown"
    live = raw.get("live")
    gpus = raw.get("gpus")
    source = raw.get("metrics_source")
    source = source if isinstance(source, dict) else {}
    url = _text(raw.get("url"))
    return RemoteServer(
        host=host,
        id=server_id,
        state=state,
        live=live if isinstance(live, bool) else state in LIVE_STATES,
        profile=_text(raw.get("profile")),
        layout=_text(raw.get("layout")),
        variant=_text(raw.get("variant")),
        url=url,
        port=_port(url),
        gpus=_indices(gpus),
        tok_s=_number(raw.get("tok_s")),
        external=raw.get("external") is True or server_id.startswith("ext-"),
        source_state=_text(source.get("state")),
        source_reason=_text(source.get("reason")),
        reason=_text(raw.get("reason")),
        ended_wall=_number(raw.get("ended_wall")),
        numa_nodes=_indices(raw.get("numa_nodes")),
        pid=pid if isinstance(pid := raw.get("pid"), int) and not isinstance(pid, bool) else None,
        uptime_s=_number(raw.get("uptime_s")),
        log_path=_text(raw.get("log_path")),
    )


def _indices(value: object) -> tuple[int, ...]:
    """A JSON list of GPU or NUMA indices (anything else in it is left out)."""
    items = value if isinstance(value, list) else []
    return tuple(i for i in items if isinstance(i, int) and not isinstance(i, bool) and i >= 0)


def remote_servers(host: str, reading: object) -> tuple[RemoteServer, ...]:
    """The servers of one host's reading (none before its first, None), in the reading's
    order; an entry without an id is skipped, and an id listed twice is shown once. The
    reading is another machine's document, so it is taken as any value and checked."""
    raw = reading.get("servers") if isinstance(reading, dict) else None
    found: dict[str, RemoteServer] = {}
    for entry in raw if isinstance(raw, list) else []:
        server = _server(host, entry)
        if server is not None and server.id not in found:
            found[server.id] = server
    return tuple(found.values())


def remote_hosts(
    summaries: Sequence[HostSummary], reading: Callable[[str], object]
) -> list[RemoteHost]:
    """Every host but this one, in hosts.toml's order, with the servers of its reading."""
    return [
        RemoteHost(
            name=s.name,
            target=s.target,
            state=s.state,
            reason=s.reason,
            age_s=s.age_s,
            servers=remote_servers(s.name, reading(s.name)),
        )
        for s in summaries
        if s.name != LOCAL
    ]


def fold_ended(
    hosts: Sequence[RemoteHost], now_wall: float | None, after_s: float, show_ended: bool
) -> tuple[list[RemoteHost], int]:
    """(hosts, how many were folded): a server that ended over `after_s` before `now_wall`
    is left out unless `show_ended` (`a`), as the local ones are; its count is still told.
    Nothing folds without a clock (a replay) or an end time."""
    shown: list[RemoteHost] = []
    folded = 0
    for host in hosts:
        kept = []
        for server in host.servers:
            end = server.ended_wall
            if (
                server.ended
                and now_wall is not None
                and end is not None
                and now_wall - end > after_s
            ):
                folded += 1
                if not show_ended:
                    continue
            kept.append(server)
        shown.append(replace(host, servers=tuple(kept)))
    return shown, folded


def host_label(host: RemoteHost, shown: int = REASON_SHOWN) -> Text:
    """`alpha  up`, `alpha  connecting` or `alpha  stale: reason` (the reason cut to
    `shown` characters)."""
    label = Text(host.name, style="bold cyan")
    label.append("  ")
    label.append(host.state, style=HOST_STYLES.get(host.state, ""))
    if host.reason and not host.up:
        reason = host.reason
        if len(reason) > shown:
            reason = reason[: shown - 1] + "…"
        label.append(f": {reason}", style="yellow")
    return label


def host_row(host: RemoteHost, columns: Sequence[str]) -> FindRow:
    """The host's own row: its label under ID, every other column blank. It sorts last
    whatever the column (a blank in each) and its servers follow it. With a REASON column
    the reason is there in full, and only there."""
    cells: dict[str, str | Text] = dict.fromkeys(columns, "")
    wide = "REASON" in cells
    if wide and host.reason and not host.up:
        cells["ID"] = host_label(replace(host, reason=None))
        cells["REASON"] = Text(host.reason, style="yellow")
    else:
        cells["ID"] = host_label(host, REASON_SHOWN_NARROW)
    order = dict.fromkeys(columns, sort_value(None))
    return FindRow(
        host.key,
        cells,
        order,
        search=f"{host.name} {host.target}",
        sorts_followers=True,
        counted=False,
    )


STATE_REASON_SHOWN = 32
"""The most of an ended server's reason the narrow STATE cell shows (the detail has all)."""


def state_cell(server: RemoteServer, host: RemoteHost, wide: bool) -> Text:
    """The STATE cell: the state as the reading says it while the host is up; `last: STATE`
    dimmed when it is not (its last reading's, not now). Without a REASON column an ended
    server's reason follows its state."""
    if not host.up:
        text = Text(f"last: {server.state}", style="dim")
    else:
        style = STATE_STYLES.get(server.state, "")
        text = Text(server.state, style=f"dim {style}" if server.ended else style)
    if server.ended and server.reason and not wide:
        reason = server.reason
        if len(reason) > STATE_REASON_SHOWN:
            reason = reason[: STATE_REASON_SHOWN - 1] + "…"
        text.append(f": {reason}", style="dim")
    return text


def server_row(server: RemoteServer, host: RemoteHost, wide: bool = True) -> FindRow:
    """A server of another host, indented under its host's row; dimmed while the host is
    not up (its last known figures) and once the server ended (with its state and reason)."""
    dim = "dim" if not host.up or server.external or server.ended else ""
    state = state_cell(server, host, wide)
    reason = server.reason if server.ended and server.reason else server.source_reason
    values: dict[str, str | Text] = {
        "ID": Text(f" {server.id}", style=dim),
        "PROFILE": Text(server.profile or "-", style=dim),
        "LAYOUT": Text(server.layout or "-", style=dim),
        "VARIANT": Text(server.variant or "-", style=dim),
        "STATE": state,
        "PORT": Text(str(server.port or "-"), style=dim),
        "GPUS": Text(format_index_set(list(server.gpus)) or "-", style=dim),
        "NUMA": Text(format_index_set(list(server.numa_nodes)) or "-", style=dim),
        "UP": Text(_uptime(server, host), style=dim),
        "REASON": Text(reason or "", style=dim or "yellow"),
    }
    order = {"STATE": sort_value(server.state), "GPUS": sort_value(min(server.gpus, default=None))}
    return FindRow(server.key, values, order, search=f"{host.name} {server.id}", follows=host.key)


def _uptime(server: RemoteServer, host: RemoteHost) -> str:
    """How long it had run at the host's latest reading (`-` once ended or unknown)."""
    if server.ended or server.uptime_s is None:
        return "-"
    return format_duration(server.uptime_s)


def remote_rows(hosts: Sequence[RemoteHost], columns: Sequence[str]) -> list[FindRow]:
    """Each host's row followed by its servers' rows."""
    rows: list[FindRow] = []
    wide = "REASON" in columns
    for host in hosts:
        rows.append(host_row(host, columns))
        rows.extend(server_row(server, host, wide) for server in host.servers)
    return rows


def _freshness(host: RemoteHost) -> str:
    if host.age_s is None:
        return "no reading yet"
    return f"read {format_duration(host.age_s)} ago"


def host_detail(host: RemoteHost, demo: bool = False) -> Table:
    """The detail pane of a host row: how it is reached, its state and what it runs."""
    table = _detail_table()
    table.add_row("host", f"{host.name}  {host.target}")
    state = Text(host.state, style=HOST_STYLES.get(host.state, ""))
    table.add_row("state", state)
    if host.reason:
        table.add_row("reason", Text(host.reason, style="yellow"))
    table.add_row("reading", _freshness(host))
    table.add_row("servers", str(len(host.servers)))
    table.add_row(
        "launch",
        Text(
            f"runs there: ddconsole {'--demo ' if demo else ''}--host {host.name} up PROFILE "
            "--layout L",
            style="dim",
        ),
    )
    return table


def remote_detail(server: RemoteServer, host: RemoteHost) -> Table:
    """The detail pane of another host's server: its host, and what its reading says."""
    table = _detail_table()
    plan = " / ".join(p for p in (server.profile, server.layout, server.variant) if p)
    table.add_row("server", f"{server.id}  {plan}" if plan else server.id)
    table.add_row("host", f"{host.name}  {host.target}")
    if not host.up:
        why = f": {host.reason}" if host.reason else ""
        table.add_row(
            "host state",
            Text(f"{host.state}{why}; the figures are its last reading's", style="yellow"),
        )
    if host.up:
        table.add_row("state", Text(server.state, style=STATE_STYLES.get(server.state, "")))
    else:
        table.add_row("state", Text(f"last: {server.state} ({_freshness(host)})", style="dim"))
    if server.ended:
        if server.reason:
            table.add_row("reason", Text(server.reason, style="red"))
        if server.ended_wall is not None:
            ended = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(server.ended_wall))
            table.add_row("ended", f"{ended} (that host's clock)")
    table.add_row("url", Text(f"{server.url} (on {host.name})") if server.url else "-")
    numa = format_index_set(list(server.numa_nodes))
    gpus = format_index_set(list(server.gpus)) or "-"
    table.add_row("gpus", f"{gpus}  NUMA {numa}" if numa else gpus)
    if server.pid is not None:
        up = _uptime(server, host)
        table.add_row("pid", f"{server.pid} on {host.name}" + (f", up {up}" if up != "-" else ""))
    if server.log_path:
        table.add_row("log", f"{server.log_path} (on {host.name})")
    if server.tok_s is None:
        table.add_row("tok/s", "-")
    elif host.up:
        table.add_row("tok/s", f"{server.tok_s:.1f}")
    else:
        table.add_row("tok/s", Text(f"last: {server.tok_s:.1f} ({_freshness(host)})", "dim"))
    if server.source_state is not None:
        source = server.source_state + (f": {server.source_reason}" if server.source_reason else "")
        table.add_row("metrics", source)
    table.add_row("reading", _freshness(host))
    if server.external:
        table.add_row(
            "external",
            Text("not started by ddconsole on that host: never signalled from here", "yellow"),
        )
    elif server.ended:
        table.add_row(
            "keys",
            Text(f"it has ended: x forgets it on {host.name}, enter shows its log's tail", "dim"),
        )
    else:
        table.add_row(
            "keys",
            Text(f"x stops, R restarts, enter shows its log's tail: run on {host.name}", "dim"),
        )
    return table


class _PlainTable(Table):
    """A rich Table whose string cells are plain text: another host's ids, paths and
    reasons are shown as sent, never read as markup."""

    def add_row(self, *renderables: RenderableType | None, **options: Any) -> None:
        super().add_row(*(Text(r) if isinstance(r, str) else r for r in renderables), **options)


def _detail_table() -> Table:
    table = _PlainTable(box=None, show_header=False, padding=(0, 1), expand=True)
    table.add_column("k", style="bold", no_wrap=True, width=10)
    table.add_column("v", overflow="fold")
    return table
