"""The Fleet screen's host row: a host read through its Prometheus says so in TARGET, as
`ddconsole fleet` does; a stale host keeps its reason."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text

from console.fleet.summary import HostSummary
from console.tui.screens.fleet import host_cells


def _host(state: str = "up", reason: str | None = None) -> HostSummary:
    return HostSummary(
        name="gpu2",
        target="ops@gpu2.lan:22",
        state=state,
        reason=reason,
        gpus_busy=2,
        gpus_total=8,
        servers=(),
        servers_ready=0,
        tok_s=None,
        sources=(),
        age_s=1.0,
        updated_wall=None,
    )


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
