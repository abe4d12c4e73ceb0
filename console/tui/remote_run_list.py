"""Other hosts' runs as the Runs and Bench screens list them: each row's key (a local run's
is its id, another host's `HOST/RUN`, a note's `HOST//NAME`), the note rows a host's listing
adds, what a stale host's run says, and when each host is listed again. Pure: no widgets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from console.bench.listing import RunRow
from console.core.units import format_duration
from console.fleet.hosts import LOCAL
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


class HostListings:
    """Other hosts' runs as last listed, and whose listing is due or under way: the
    bookkeeping the Runs and Bench screens share (each screen reads the listings itself)."""

    def __init__(self) -> None:
        self.remote: dict[str, HostRuns] = {}
        """By host, the latest listing (a failed one keeps the last good rows)."""
        self._fetching: set[str] = set()
        self._fetched_at: dict[str, float] = {}

    def due(self, hosts: Iterable[str], every: Callable[[str], float], now: float) -> list[str]:
        """The other hosts whose listing is `every(host)` old (or that have none) and not
        under way; each is under way from now until `ended`."""
        found = []
        for name in hosts:
            if name == LOCAL or name in self._fetching:
                continue
            if now - self._fetched_at.get(name, -math.inf) < every(name):
                continue
            self._fetched_at[name] = now
            self._fetching.add(name)
            found.append(name)
        return found

    def ended(self, name: str) -> None:
        """The host's listing is no longer under way (read, failed or cancelled)."""
        self._fetching.discard(name)

    def take(self, name: str, listed: HostRuns) -> bool:
        """Keep `listed` as the host's (even when unchanged: its time says how old it is);
        True when its rows changed."""
        same = listed.same_rows(self.remote.get(name))
        self.remote[name] = listed
        return not same

    def again(self, name: str | None = None) -> None:
        """List that host (every host, without one) again at the next chance."""
        if name is None:
            self._fetched_at.clear()
        else:
            self._fetched_at.pop(name, None)

    def row(self, host: str, run_id: str) -> RunRow | None:
        """That run as the host's latest listing has it."""
        listed = self.remote.get(host)
        if listed is None:
            return None
        return next((row for row in listed.rows if row.run_id == run_id), None)
