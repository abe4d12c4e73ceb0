"""The Fleet screen's host row: a host read through its Prometheus says so in TARGET, as
`ddconsole fleet` does; a stale host keeps its reason."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text

from console.fleet.summary import HostSummary
from console.tui.screens.fleet import host_cells
from tests.unit.test_remote_rows import summary


def _host(state: str = "up", reason: str | None = None) -> HostSummary:
    return replace(summary("gpu2", state, reason), target="ops@gpu2.lan:22")


def test_a_host_read_through_prometheus_names_it_in_target() -> None:
    cells = host_cells(_host(), via="http://prom:9090")
    assert cells[1] == "ops@gpu2.lan:22 via http://prom:9090"
    assert host_cells(_host())[1] == "ops@gpu2.lan:22"


def test_a_stale_host_keeps_its_reason() -> None:
    cells = host_cells(_host("stale", "connection lost"), via="http://prom:9090")
    state, reason = cells[2], cells[-1]
    assert isinstance(state, Text)
    assert isinstance(reason, Text)
    assert (state.plain, reason.plain) == ("stale", "connection lost")


def test_a_host_without_a_reading_shows_no_server_count() -> None:
    connecting = replace(_host("connecting"), age_s=None)
    servers = host_cells(connecting)[4]
    assert isinstance(servers, Text)
    assert servers.plain == "-"  # not 0/0: nothing is known yet
