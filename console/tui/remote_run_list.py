"""Other hosts' runs as the Runs and Bench screens list them: each row's key (a local run's
is its id, another host's `HOST/RUN`, a note's `HOST//NAME`), the note rows a host's listing
adds, and what a stale host's run says. Pure: no widgets.
"""

from __future__ import annotations

from console.core.units import format_duration
from console.fleet.remote_runs import HostRuns

NOTE = "//"
"""Between a host and a note's name in a note row's key: no run id holds a `/`."""


def remote_key(host: str, run_id: str) -> str:
    """Another host's run's row key (a local run's is its id, which holds no `/`)."""
    return f"{host}/{run_id}"


def split_key(key: str) -> tuple[str | None, str]:
    """(host, run id) of a row key, host None for a local run; a note row's "run id" is its
    note's name after a `/`."""
    host, slash, rest = key.partition("/")
    return (host, rest) if slash else (None, key)


def host_notes(runs: HostRuns | None, host: str) -> list[tuple[str, str, str]]:
    """The rows a host's listing adds besides its runs: (key, short text, full text) for a
    listing not read yet, one that failed, older runs not listed, entries that were not runs."""
    if runs is None:
        text = f"{host}: reading its runs…"
        return [(f"{host}{NOTE}pending", text, text)]
    notes = []
    if runs.error is not None:
        shown = f"{host}: {runs.error}"
        kept = f"; its {len(runs.rows)} runs below are as last read" if runs.rows else ""
        notes.append((f"{host}{NOTE}error", shown, shown + kept))
    if runs.more:
        notes.append(
            (
                f"{host}{NOTE}more",
                f"{host}: {runs.more} older runs not listed",
                f"{host} has {runs.more} runs older than the {len(runs.rows)} listed here: "
                f"`ddconsole --host {host} runs list` lists every one",
            )
        )
    if runs.skipped:
        text = f"{host}: {runs.skipped} entries of its listing were not runs (skipped)"
        notes.append((f"{host}{NOTE}skipped", text, text))
    return notes


def stale_line(runs: HostRuns | None, host: str, now: float) -> str | None:
    """What a stale host's run detail says above its summary: why, and how old the
    listing it was last read with is; None while the host's listing is current."""
    if runs is None or runs.error is None:
        return None
    age = (
        f", {format_duration(max(0.0, now - runs.listed_wall))} ago"
        if runs.listed_wall is not None
        else ""
    )
    return f"{host} is {runs.error}; this run is as last read{age}"


def stale_status(status: str) -> str:
    """A stale host's run's STATUS: as last read, marked."""
    return f"{status} (stale)"
