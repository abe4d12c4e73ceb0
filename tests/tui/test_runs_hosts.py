"""The Runs screen's pure parts for other hosts: row keys that tell a host's runs and notes
apart from this host's runs, and the notes a host's listing adds (not read yet, failed,
older runs not listed)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from console.bench.listing import list_runs
from console.fleet.remote_runs import HostRuns
from console.tui.screens.runs import host_notes, remote_key, split_key

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "runs"
NEWER = "20261129-185848-qwen-b15-recheck"


def test_row_keys_tell_hosts_and_notes_apart():
    assert split_key(NEWER) == (None, NEWER)
    assert split_key(remote_key("alpha", NEWER)) == ("alpha", NEWER)
    assert host_notes(None, "alpha") == [
        ("alpha//pending", "alpha: reading its runs…", "alpha: reading its runs…")
    ]
    newest = list_runs(FIXTURES)[-1]
    assert newest.run_id == NEWER
    runs = HostRuns("alpha", (newest,), more=1, skipped=0, error="stale: connection refused")
    notes = host_notes(runs, "alpha")
    assert [split_key(key) for key, _, _ in notes] == [("alpha", "/error"), ("alpha", "/more")]
    assert notes[0][1] == "alpha: stale: connection refused"
    assert "as last read" in notes[0][2]
    assert notes[1][1] == "alpha: 1 older runs not listed"
    assert "ddconsole --host alpha runs list" in notes[1][2]
    # Entries that were not runs get a row; a good listing adds none.
    skipped = host_notes(replace(runs, error=None, more=0, skipped=2), "alpha")
    assert [text for _, text, _ in skipped] == [
        "alpha: 2 entries of its listing were not runs (skipped)"
    ]
    assert host_notes(HostRuns("alpha", (newest,)), "alpha") == []
