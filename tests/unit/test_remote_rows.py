"""The Servers screen's rows for another host: a host row then its servers, built from a
reading as `ddconsole --demo metrics --json` prints it; keys never collide with a local id,
a stale host's rows are dimmed with its reason, and a damaged reading gives unknowns."""

from __future__ import annotations

import copy
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from console.fleet.summary import HostSummary
from console.tui.remote_rows import (
    RemoteHost,
    fold_ended,
    host_detail,
    host_label,
    parse_key,
    remote_detail,
    remote_hosts,
    remote_rows,
    remote_servers,
    server_key,
)
from console.tui.screens.servers import COLUMNS, NARROW_COLUMNS
from console.tui.widgets.finder import Finder, plain

# One server of a real `ddconsole --demo metrics --once --json` (a qwen3.6-27b tp1 demo server,
# ready), its latency block left out.
READY: dict[str, Any] = {
    "id": "qwen3.6-27b-tp1-1",
    "metrics_source": {
        "name": "server:qwen3.6-27b-tp1-1",
        "state": "ok",
        "reason": None,
        "last_poll_ms": 14.361231000009411,
    },
    "state": "ready",
    "url": "http://127.0.0.1:39925",
    "profile": "qwen3.6-27b",
    "layout": "tp1",
    "variant": "off",
    "gpus": [0],
    "tok_s": 0.0,
    "finished_tok_s": 0.0,
    "requests_s": 0.0,
    "gen_throughput": 0.0,
    "running": 0.0,
    "queued": 0.0,
    "token_usage": 0.0,
    "accept_length": None,
    "accept_rate": None,
    "ttft_p50_s": 15.0,
    "ttft_p99_s": 19.9,
    "itl_p50_s": 0.02575,
    "itl_p99_s": 0.04976666666666667,
    "e2e_p50_s": 13.5,
    "e2e_p99_s": 14.969999999999999,
    "live": True,
    "last": None,
}


def reading() -> dict[str, Any]:
    stopped = {
        **copy.deepcopy(READY),
        "id": "qwen3.6-27b-tp2-1",
        "layout": "tp2",
        "gpus": [2, 3],
        "state": "stopped",
        "url": "http://127.0.0.1:40111",
        "tok_s": None,
        "live": False,
        "last": {"at_wall": 1796531100.0, "tok_s": 88.0},
    }
    return {
        "schema_version": 1,
        "time": 1796531124.6180184,
        "interval_s": 1.0,
        "gpus": [{"index": i, "util_pct": 0.0, "state": "ok", "reason": None} for i in range(8)],
        "servers": [copy.deepcopy(READY), stopped],
        "sources": [{"name": "console", "state": "ok", "reason": None, "last_poll_ms": 0.05}],
    }


def summary(name: str, state: str = "up", reason: str | None = None) -> HostSummary:
    return HostSummary(
        name=name,
        target="tester@127.0.0.2:2222" if name != "local" else "local",
        state=state,
        reason=reason,
        gpus_busy=1,
        gpus_total=8,
        servers=(),
        servers_ready=1,
        tok_s=0.0,
        sources=(),
        age_s=0.4,
        updated_wall=1796531124.6,
    )


def render(table: Table) -> str:
    console = Console(width=120, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def test_servers_of_a_reading() -> None:
    servers = remote_servers("alpha", reading())
    assert [s.id for s in servers] == ["qwen3.6-27b-tp1-1", "qwen3.6-27b-tp2-1"]
    ready, stopped = servers
    assert (ready.profile, ready.layout, ready.variant) == ("qwen3.6-27b", "tp1", "off")
    assert (ready.port, ready.gpus, ready.live, ready.source_state) == (39925, (0,), True, "ok")
    assert (stopped.state, stopped.live, stopped.gpus) == ("stopped", False, (2, 3))
    assert remote_servers("alpha", None) == ()


def test_damaged_reading_gives_unknowns() -> None:
    data = reading()
    data["servers"] = [
        {"id": 7},  # no string id: skipped
        "text",
        {"id": "x-1", "gpus": "0,1", "url": "http://[bad", "live": "yes", "tok_s": float("nan")},
        {"id": "x-1", "state": "ready"},  # listed twice: once
        {"id": "ext-4242", "state": "ready"},
    ]
    servers = remote_servers("alpha", data)
    assert [s.id for s in servers] == ["x-1", "ext-4242"]
    damaged, external = servers
    assert (damaged.state, damaged.gpus, damaged.port, damaged.tok_s) == ("unknown", (), None, None)
    assert damaged.live is False
    assert damaged.profile is None
    assert external.external
    assert external.live
    assert remote_servers("alpha", {"servers": {"id": "x"}}) == ()


def test_keys_never_collide_with_a_local_id() -> None:
    key = server_key("alpha", "qwen3.6-27b-tp1-1")
    assert key != "qwen3.6-27b-tp1-1"
    assert parse_key(key) == ("alpha", "qwen3.6-27b-tp1-1")
    assert parse_key("host:alpha") == ("alpha", None)
    assert parse_key("qwen3.6-27b-tp1-1") is None
    assert parse_key("node:qwen3.6-27b-tp1-1") is None


def test_hosts_but_this_one_in_order_with_their_servers() -> None:
    readings = {"alpha": reading(), "beta": None}
    hosts = remote_hosts(
        [summary("local"), summary("alpha"), summary("beta", "connecting")], readings.get
    )
    assert [(h.name, h.state, len(h.servers)) for h in hosts] == [
        ("alpha", "up", 2),
        ("beta", "connecting", 0),
    ]
    rows = remote_rows(hosts, COLUMNS)
    assert [r.key for r in rows] == [
        "host:alpha",
        "remote:alpha/qwen3.6-27b-tp1-1",
        "remote:alpha/qwen3.6-27b-tp2-1",
        "host:beta",
    ]
    assert plain(rows[0].cells["ID"]) == "alpha  up"
    assert plain(rows[3].cells["ID"]) == "beta  connecting"
    cells = {c: plain(v) for c, v in rows[1].cells.items()}
    assert cells["ID"].strip() == "qwen3.6-27b-tp1-1"
    assert (cells["PROFILE"], cells["LAYOUT"], cells["VARIANT"]) == ("qwen3.6-27b", "tp1", "off")
    assert (cells["STATE"], cells["PORT"], cells["GPUS"]) == ("ready", "39925", "0")
    assert {c: plain(v) for c, v in rows[2].cells.items()}["GPUS"] == "2-3"
    # Every column the narrow table shows is there.
    assert all(set(NARROW_COLUMNS) <= set(r.cells) for r in rows)


def test_a_stale_host_keeps_its_servers_dimmed_with_the_reason() -> None:
    reason = "connection lost: Connection reset by peer; reconnecting with backoff every 30 s"
    (host,) = remote_hosts([summary("alpha", "stale", reason)], lambda _: reading())
    label = plain(host_label(host))
    assert label.startswith("alpha  stale: connection lost")
    assert len(label) < len(f"alpha  stale: {reason}")  # cut short; the detail has it all
    rows = remote_rows([host], COLUMNS)
    assert plain(rows[0].cells["REASON"]) == reason
    narrow = plain(remote_rows([host], NARROW_COLUMNS)[0].cells["ID"])
    assert narrow.startswith("alpha  stale: connection")
    assert len(narrow) < len(label)
    server_id = rows[1].cells["ID"]
    assert not isinstance(server_id, str)
    assert server_id.style == "dim"
    text = render(remote_detail(host.servers[0], host))
    assert "alpha" in text
    assert "stale: connection lost" in text
    assert "last reading" in text


def test_filter_keeps_only_matching_servers_under_their_host_and_sorts_within() -> None:
    two = {"alpha": reading(), "beta": reading()}
    hosts = remote_hosts([summary("alpha"), summary("beta")], two.__getitem__)
    rows = remote_rows(hosts, COLUMNS)
    # A filter matching one server of each host keeps each host's row and that server only.
    found = [r.key for r in Finder(text="tp2").apply(rows)]
    assert found == [
        "host:alpha",
        "remote:alpha/qwen3.6-27b-tp2-1",
        "host:beta",
        "remote:beta/qwen3.6-27b-tp2-1",
    ]
    # A filter matching the host itself keeps all its servers.
    assert len(Finder(text="beta").apply(rows)) == 3
    assert Finder(text="no-such-thing").apply(rows) == []
    # Sorted by STATE, each host's servers reorder under it (ready before stopped, then
    # reversed), and the host rows keep their place whatever the direction.
    finder = Finder(column="STATE", descending=True)
    assert [r.key for r in finder.apply(rows)] == [
        "host:alpha",
        "remote:alpha/qwen3.6-27b-tp2-1",
        "remote:alpha/qwen3.6-27b-tp1-1",
        "host:beta",
        "remote:beta/qwen3.6-27b-tp2-1",
        "remote:beta/qwen3.6-27b-tp1-1",
    ]
    finder = Finder(column="ID")
    assert next(r.key for r in finder.apply([*rows[3:], rows[0], *rows[1:3]])) == "host:beta"


def ended(ago_s: float, now: float = 1796531124.6) -> dict[str, Any]:
    """A server that failed `ago_s` before `now` as a reading lists it once its source is
    gone: state, reason, ended_wall, no figures (console/telemetry/reading.py)."""
    entry: dict[str, Any] = {
        "id": "qwen3.6-27b-tp1-2",
        "metrics_source": {
            "name": "server:qwen3.6-27b-tp1-2",
            "state": "unavailable",
            "reason": "the server failed",
            "last_poll_ms": None,
        },
        "state": "failed",
        "url": "http://127.0.0.1:30002",
        "profile": "qwen3.6-27b",
        "layout": "tp1",
        "variant": "dflash",
        "gpus": [1],
        "reason": "killed by SIGKILL",
        "ended_wall": now - ago_s,
    }
    entry.update(dict.fromkeys(k for k in READY if k.endswith(("_s", "_rate", "_length"))))
    entry.update({"tok_s": None, "running": None, "queued": None, "live": False, "last": None})
    return entry


def test_ended_servers_listed_dimmed_with_reason_and_folded_like_local_ones() -> None:
    now = 1796531124.6
    data = reading()
    data["servers"] = [copy.deepcopy(READY), ended(60), {**ended(7200), "id": "old-1"}]
    hosts = remote_hosts([summary("alpha")], lambda _: data)
    server = hosts[0].server("qwen3.6-27b-tp1-2")
    assert server is not None
    assert server.ended
    assert (server.reason, server.ended_wall) == ("killed by SIGKILL", now - 60)
    # Folded after an hour: the old one is left out (and counted) until `a`.
    shown, folded = fold_ended(hosts, now, 3600.0, show_ended=False)
    assert folded == 1
    assert [s.id for s in shown[0].servers] == ["qwen3.6-27b-tp1-1", "qwen3.6-27b-tp1-2"]
    everything, folded = fold_ended(hosts, now, 3600.0, show_ended=True)
    assert folded == 1
    assert len(everything[0].servers) == 3
    assert fold_ended(hosts, None, 3600.0, show_ended=False)[1] == 0  # a replay folds nothing
    rows = {r.key: r for r in remote_rows(shown, COLUMNS)}
    row = rows["remote:alpha/qwen3.6-27b-tp1-2"]
    assert plain(row.cells["STATE"]) == "failed"
    assert plain(row.cells["REASON"]) == "killed by SIGKILL"
    cell = row.cells["ID"]
    assert isinstance(cell, Text)
    assert cell.style == "dim"
    narrow = {r.key: r for r in remote_rows(shown, NARROW_COLUMNS)}
    assert plain(narrow["remote:alpha/qwen3.6-27b-tp1-2"].cells["STATE"]) == (
        "failed: killed by SIGKILL"
    )
    text = render(remote_detail(server, shown[0]))
    assert "killed by SIGKILL" in text
    assert "it has ended: x forgets it on alpha" in text


def test_a_stale_hosts_servers_read_as_last_known() -> None:
    data = reading()
    data["servers"][0]["tok_s"] = 42.5
    (host,) = remote_hosts([summary("alpha", "stale", "connection lost")], lambda _: data)
    rows = {r.key: r for r in remote_rows([host], NARROW_COLUMNS)}
    state = rows["remote:alpha/qwen3.6-27b-tp1-1"].cells["STATE"]
    assert isinstance(state, Text)
    assert state.plain == "last: ready"
    assert state.style == "dim"
    text = render(remote_detail(host.servers[0], host))
    assert "last: ready (read 0.4s ago)" in text
    assert "last: 42.5 (read 0.4s ago)" in text
    # The wide row gives the stale reason once, in REASON.
    wide = remote_rows([host], COLUMNS)[0]
    assert plain(wide.cells["ID"]) == "alpha  stale"
    assert plain(wide.cells["REASON"]) == "connection lost"


def test_detail_names_the_host_and_what_is_known() -> None:
    (host,) = remote_hosts([summary("alpha")], lambda _: reading())
    assert isinstance(host, RemoteHost)
    text = render(remote_detail(host.servers[0], host))
    for part in ("qwen3.6-27b-tp1-1", "qwen3.6-27b / tp1 / off", "alpha", "tester@127.0.0.2:2222"):
        assert part in text, text
    assert "http://127.0.0.1:39925" in text
    assert "x stops" in text


def test_a_remote_server_shows_its_numa_pid_uptime_and_log_there() -> None:
    data = reading()
    data["servers"][0] |= {
        "numa_nodes": [1],
        "pid": 4242,
        "uptime_s": 75.0,
        "log_path": "/var/log/dd/qwen.log",
    }
    (host,) = remote_hosts([summary("alpha")], lambda _: data)
    assert isinstance(host, RemoteHost)
    rows = {row.key: row for row in remote_rows([host], COLUMNS)}
    row = rows[server_key("alpha", "qwen3.6-27b-tp1-1")]
    assert (plain(row.cells["NUMA"]), plain(row.cells["UP"])) == ("1", "1m15s")
    stopped = rows[server_key("alpha", "qwen3.6-27b-tp2-1")]
    assert plain(stopped.cells["UP"]) == "-"  # ended: no uptime
    text = render(remote_detail(host.servers[0], host))
    assert "0  NUMA 1" in text
    assert "4242 on alpha, up 1m15s" in text
    assert "/var/log/dd/qwen.log (on alpha)" in text


def test_a_hosts_detail_names_the_launch_there_demo_or_not() -> None:
    [host] = remote_hosts([summary("alpha")], lambda _: reading())
    assert "ddconsole --host alpha up PROFILE --layout L" in render(host_detail(host))
    assert "ddconsole --demo --host alpha up PROFILE" in render(host_detail(host, demo=True))
