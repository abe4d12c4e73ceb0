"""Another host's runs as `runs list --json` and `runs show ID --json` really print them
(the CLI run in-process over the Runs screen's fixture runs), parsed back into the rows and
summaries this host's own runs are; what is not a run is skipped, never raised."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from console.bench.listing import Progress, list_runs
from console.bench.rundir import RunDir
from console.bench.summary import load_summary
from console.fleet.remote_runs import (
    MAX_TEXT,
    SummaryCache,
    parse_run_list,
    parse_run_row,
    parse_summary,
    row_stamp,
    valid_run_id,
)

FIXTURES = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "runs"
OLDER, NEWER = "20261129-185811-qwen-ddtree-budgets", "20261129-185848-qwen-b15-recheck"


@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    shutil.copytree(FIXTURES, root)
    return root


@pytest.fixture
def listing(cli, runs_root: Path) -> str:
    result = cli("--demo", "runs", "list", "--json", "--out", str(runs_root))
    assert result.code == 0, result.err
    return str(result.out)


def test_a_listing_reads_back_as_the_rows_it_was_printed_from(listing: str, runs_root: Path):
    rows, more, skipped = parse_run_list(listing)
    assert [row.run_id for row in rows] == [NEWER, OLDER]  # newest first, as the screen lists
    assert rows == list(reversed(list_runs(runs_root)))
    assert (more, skipped) == (0, 0)


def test_only_the_newest_are_kept_and_the_rest_counted(listing: str):
    rows, more, skipped = parse_run_list(listing, limit=1)
    assert [row.run_id for row in rows] == [NEWER]
    assert (more, skipped) == (1, 0)


def test_entries_that_are_not_runs_are_skipped_and_bad_fields_read_as_unknown(listing: str):
    entries = json.loads(listing)
    odd = {
        "run_id": "20261201-090000-odd",
        "status": 7,
        "cells": "3",
        "cells_done": None,
        "progress": "halfway",
        "created_wall": "yesterday",
        "name": "n" * 5000,
    }
    entries += [42, "run", None, {}, {"run_id": ""}, {"run_id": "../../etc"}, {"run_id": "-x"}]
    entries += [{"run_id": 12}, odd]
    rows, more, skipped = parse_run_list(json.dumps(entries))
    assert skipped == 8
    assert more == 0
    first = rows[0]
    assert first.run_id == "20261201-090000-odd"
    assert (first.status, first.cells, first.cells_done) == ("7", 0, 0)
    assert first.progress is None
    assert first.created_wall is None
    assert first.name is not None
    assert len(first.name) == MAX_TEXT
    assert [row.run_id for row in rows[1:]] == [NEWER, OLDER]


@pytest.mark.parametrize(
    "text", ["", "not json", '{"run_id": "x"}', "null", '"runs"', "[" * 100_000]
)
def test_a_listing_that_is_no_list_is_an_error(text: str):
    with pytest.raises(ValueError):
        parse_run_list(text)


def test_a_row_without_a_usable_id_is_no_run():
    assert parse_run_row({"status": "done"}) is None
    assert parse_run_row(["run_id", "x"]) is None
    assert valid_run_id(NEWER)
    for bad in ("", ".", "..", "a/b", "a\\b", "--json", "x\n", "x" * (MAX_TEXT + 1), None, 3):
        assert not valid_run_id(bad), bad


def test_a_shown_run_reads_back_as_its_summary(cli, runs_root: Path):
    result = cli("--demo", "runs", "show", NEWER, "--json", "--out", str(runs_root))
    assert result.code == 0, result.err
    summary = parse_summary(result.out)
    assert summary == load_summary(RunDir(runs_root / NEWER))
    assert summary.run_id == NEWER
    assert summary.cells


@pytest.mark.parametrize(
    "text",
    [
        "nope",
        "[]",
        '{"schema_version": 1, "run_id": "x", "cells": [], "best": [], "findings": []}',
        '{"schema_version": 4, "run_id": "x", "cells": [1], "best": [], "findings": []}',
        '{"schema_version": 4, "cells": [], "best": [], "findings": []}',
    ],
)
def test_what_is_not_a_summary_is_an_error(text: str):
    with pytest.raises(ValueError):
        parse_summary(text)


def test_a_cached_summary_serves_only_the_row_it_was_read_for(listing: str, runs_root: Path):
    rows, _, _ = parse_run_list(listing)
    newer, older = rows
    summary = load_summary(RunDir(runs_root / NEWER))
    cache = SummaryCache(size=2)
    cache.put("alpha", NEWER, row_stamp(newer), summary)
    assert cache.get("alpha", NEWER, row_stamp(newer)) is summary
    assert cache.get("beta", NEWER, row_stamp(newer)) is None
    # The same run now running again, or its progress moved: read again.
    running = replace(newer, status="running")
    assert cache.get("alpha", NEWER, row_stamp(running)) is None
    progress = Progress(cell="c0", level=1, done=3, planned=8, updated_wall=1.0)
    moved = replace(running, progress=replace(progress, done=4))
    assert row_stamp(replace(running, progress=progress)) != row_stamp(moved)
    # The least recently used goes first.
    cache.put("alpha", OLDER, row_stamp(older), summary)
    assert cache.get("alpha", NEWER, row_stamp(newer)) is summary
    cache.put("beta", OLDER, row_stamp(older), summary)
    assert len(cache) == 2
    assert cache.get("alpha", OLDER, row_stamp(older)) is None
    assert cache.get("alpha", NEWER, row_stamp(newer)) is summary


async def test_a_call_to_a_host_the_fleet_does_not_have_is_a_reason() -> None:
    from console.fleet.fleet import Fleet
    from console.fleet.hosts import LOCAL_HOST
    from console.fleet.remote_runs import RemoteRunError, call_ddconsole

    fleet = Fleet([LOCAL_HOST])
    with pytest.raises(RemoteRunError, match="gone is not a host of this console's fleet"):
        await call_ddconsole(fleet, "gone", ["runs", "list", "--json"], 5)
