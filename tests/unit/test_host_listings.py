"""The bookkeeping Runs and Bench share for other hosts' run lists: which host is due a
listing (never this one, never one under way), what a new listing changed, and a run by id."""

from __future__ import annotations

from pathlib import Path

from console.bench.listing import RunRow
from console.fleet.remote_runs import HostRuns
from console.tui.remote_run_list import HostListings


def _row(run_id: str, status: str = "done") -> RunRow:
    return RunRow(
        run_id=run_id,
        path=Path(run_id),
        name=None,
        kind="bench",
        status=status,
        cells_done=1,
        cells=1,
        created_wall=1.0,
        progress=None,
    )


def test_a_host_is_due_once_until_its_listing_ends_and_its_time_passes() -> None:
    listings = HostListings()
    every = {"alpha": 30.0, "beta": 5.0}
    hosts = ["local", "alpha", "beta"]
    assert listings.due(hosts, every.__getitem__, 100.0) == ["alpha", "beta"]
    assert listings.due(hosts, every.__getitem__, 200.0) == []  # both under way
    listings.ended("alpha")
    listings.ended("beta")
    assert listings.due(hosts, every.__getitem__, 104.0) == []
    assert listings.due(hosts, every.__getitem__, 106.0) == ["beta"]
    listings.again("alpha")
    assert listings.due(hosts, every.__getitem__, 107.0) == ["alpha"]
    listings.ended("alpha")
    listings.ended("beta")
    listings.again()
    assert listings.due(hosts, every.__getitem__, 108.0) == ["alpha", "beta"]


def test_a_listing_is_kept_and_says_whether_its_rows_changed() -> None:
    listings = HostListings()
    first = HostRuns("alpha", (_row("r1", "running"),), listed_wall=1.0)
    assert listings.take("alpha", first)
    assert not listings.take("alpha", HostRuns("alpha", first.rows, listed_wall=2.0))
    assert listings.remote["alpha"].listed_wall == 2.0  # kept: its time says how old it is
    assert listings.take("alpha", HostRuns("alpha", (_row("r1"),), listed_wall=3.0))
    assert listings.row("alpha", "r1") == _row("r1")
    assert listings.row("alpha", "r2") is None
    assert listings.row("beta", "r1") is None
