"""The Bench screen's view of the fleet's other hosts: the fleet to read them through, their
ready servers as benchmark targets (from each host's latest reading, as the Servers screen's
remote rows have them), and what the screen says about running there.

Pure but for `other_fleet`, which asks the backend; no widgets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text

from console.fleet.hosts import LOCAL
from console.fleet.remote_ops import by_hand, valid_server_id
from console.tui.remote_rows import REASON_SHOWN, RemoteHost, RemoteServer, host_label

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet
    from console.tui.backend import Backend


def other_fleet(backend: Backend) -> Fleet | None:
    """The running fleet when it has a host besides this one; None otherwise (one host is
    shown as it always was)."""
    fleet = backend.fleet_now()
    if fleet is None or all(host.name == LOCAL for host in fleet.hosts):
        return None
    return fleet


@dataclass(frozen=True)
class Target:
    """One line of the targets list: another host's ready server (`server` set), or a note
    on a host that has none to offer now (disabled)."""

    key: str
    label: Text
    host: str
    server: RemoteServer | None = None


def remote_targets(hosts: Sequence[RemoteHost]) -> list[Target]:
    """Each other host's ready servers, in its reading's order, labelled with the host; a
    stale host is one note with its reason instead (its servers cannot be reached)."""
    targets: list[Target] = []
    for host in hosts:
        if host.state == "stale":
            targets.append(Target(host.key, host_label(host, REASON_SHOWN), host.name))
            continue
        for server in host.servers:
            if server.state != "ready" or not server.live or not valid_server_id(server.id):
                continue
            label = Text.assemble((host.name, "bold"), f"  {server.id}")
            label.append(f"  {server.variant or '-'}  :{server.port or '-'}")
            targets.append(Target(server.key, label, host.name, server))
    return targets


def campaign_note(host: str, demo: bool = False) -> str:
    """What a campaign key says while another host's server is highlighted."""
    return (
        f"Campaigns run on this host only (not on {host}, whose server is highlighted); to "
        f"run one there: {by_hand(host, 'campaign', 'FILE.toml', '--detach', demo=demo)}"
    )


def remote_bench_detail(
    host: str, args: Sequence[str], left: Sequence[str], demo: bool = False
) -> str:
    """The confirmation's lines on where and how a benchmark runs on another host."""
    lines = [f"It runs detached on {host}: {by_hand(host, *args, demo=demo)}"]
    if left:
        lines.append(f"Not carried there: {', '.join(left)}.")
    lines.append("x on its row stops it there.")
    return "\n".join(lines)
