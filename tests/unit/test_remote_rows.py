"""The Servers screen's rows for another host: a host row then its servers, built from a
reading as `ddconsole --demo metrics --json` prints it; keys never collide with a local id,
a stale host's rows are dimmed with its reason, and a damaged reading gives unknowns."""

from __future__ import annotations

import copy
from typing import Any

from rich.console import Console
from rich.table import Table

from console.fleet.summary import HostSummary
from console.tui.remote_rows import (
    RemoteHost,
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


def test_filter_and_sort_keep_servers_under_their_host() -> None:
    hosts = remote_hosts([summary("alpha")], lambda _: reading())
    rows = remote_rows(hosts, COLUMNS)
    # A filter matching one server keeps its host's row (and the host's servers) listed.
    found = Finder(text="tp2").apply(rows)
    assert [r.key for r in found] == [r.key for r in rows]
    assert Finder(text="no-such-thing").apply(rows) == []
    finder = Finder()
    finder.cycle(["ID"])
    assert next(r.key for r in finder.apply(rows)) == "host:alpha"


def test_detail_names_the_host_and_what_is_known() -> None:
    (host,) = remote_hosts([summary("alpha")], lambda _: reading())
    assert isinstance(host, RemoteHost)
    text = render(remote_detail(host.servers[0], host))
    for part in ("qwen3.6-27b-tp1-1", "qwen3.6-27b / tp1 / off", "alpha", "tester@127.0.0.2:2222"):
        assert part in text, text
    assert "http://127.0.0.1:39925" in text
    assert "x stops" in text
