"""Another host's runs, read over the fleet: `ddconsole runs list --json` and `runs show
--exact --json ID` run there (`Fleet.run`), parsed into the `RunRow` and `RunSummary` this
host's own runs are shown as.

What a host sends is external input: an entry that is not a run is skipped and counted, a
listing or summary that cannot be read is a reason, and a lost host or failed call is a
reason too (`stale: ...`), never an exception for the caller. SSH is imported only once a
fleet is running: the Runs screen imports this module with one host too.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from console.bench.listing import RunRow
from console.bench.results import RunSummary
from console.core.errors import ConsoleError

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet
    from console.fleet.link import RemoteResult

LIST_ARGS = ("runs", "list", "--json")
LIST_TIMEOUT_S = 30.0
"""A listing's whole call (connect, a remote Python start, the folder read)."""
SHOW_TIMEOUT_S = 45.0
"""A summary's call: a run without a fresh summary.json has it rebuilt there first."""
MAX_PER_HOST = 200
"""Runs kept per host, the newest; the rest are counted, not listed."""
CACHE_SIZE = 32
"""Remote summaries kept (a summary is one run's tables: tens of kB)."""
MAX_TEXT = 200
"""A remote row's name, kind, status or error is cut to this many characters."""

RowStamp = tuple[str, int, int, float | None, int | None]
"""What of a listed run tells that its summary may have changed."""


class RemoteRunError(ConsoleError):
    """A remote run's summary cannot be had; `message` says why in one line."""


@dataclass(frozen=True, slots=True)
class HostRuns:
    """One host's runs as last listed."""

    host: str
    rows: tuple[RunRow, ...] = ()
    """Newest first, at most `MAX_PER_HOST`."""
    more: int = 0
    """Older runs the host has beyond `rows`."""
    skipped: int = 0
    """Entries of the listing that were not runs."""
    error: str | None = None
    """Why the latest listing could not be had; `rows` are then the last good listing's."""
    listed_wall: float | None = None
    """When the last good listing was read (Unix time); None before any."""

    def same_rows(self, other: HostRuns | None) -> bool:
        """Whether `other` lists the same as this one, whenever each was read."""
        return other is not None and replace(other, listed_wall=None) == replace(
            self, listed_wall=None
        )


def valid_run_id(value: object) -> bool:
    """A run folder's name as `runs show` takes it: no path, no option."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_TEXT
        and "/" not in value
        and "\\" not in value
        and value not in (".", "..")
        and not value.startswith("-")
        and value.isprintable()
    )


def _cut(value: str | None) -> str | None:
    return value if value is None or len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"


def parse_run_row(data: object) -> RunRow | None:
    """One entry of `runs list --json` as a RunRow; None for what is not a run (no usable
    run id). Missing or wrongly typed fields read as unknown, as `RunRow.from_json` has them."""
    if not isinstance(data, dict) or not valid_run_id(data.get("run_id")):
        return None
    try:
        row = RunRow.from_json(data)
    except Exception:  # another host's output: whatever the parser trips on, not a run
        return None
    return replace(
        row,
        name=_cut(row.name),
        kind=_cut(row.kind),
        status=_cut(row.status) or "unknown",
        error=_cut(row.error),
    )


def parse_run_list(text: str, limit: int = MAX_PER_HOST) -> tuple[list[RunRow], int, int]:
    """`runs list --json` (oldest first) as (its newest `limit` rows newest first, how many
    more there are, how many entries were skipped); ValueError when it is not a list."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, list):
        raise ValueError(f"a JSON {type(data).__name__}, not a list of runs")
    rows: list[RunRow] = []
    skipped = 0
    for entry in data:
        row = parse_run_row(entry)
        if row is None:
            skipped += 1
        else:
            rows.append(row)
    rows.reverse()
    return rows[:limit], max(0, len(rows) - limit), skipped


def parse_summary(text: str) -> RunSummary:
    """`runs show ID --json` as a RunSummary; ValueError when it is not one."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    try:
        return RunSummary.from_json(data)
    except ValueError:
        raise
    except Exception as exc:  # another host's output: whatever the parser trips on
        raise ValueError(f"summary unreadable: {exc!r}") from None


def row_stamp(row: RunRow) -> RowStamp:
    """The row's status, cells and progress mark: a remote summary cached under another
    stamp is fetched again."""
    progress = row.progress
    return (
        row.status,
        row.cells_done,
        row.cells,
        None if progress is None else progress.updated_wall,
        None if progress is None else progress.done,
    )


class SummaryCache:
    """The latest remote summaries, each with the stamp of the row it was fetched for;
    the least recently used goes first."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], tuple[RowStamp, RunSummary]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, host: str, run_id: str, stamp: RowStamp) -> RunSummary | None:
        """The summary fetched for this stamp of the run; None when absent or out of date."""
        key = (host, run_id)
        found = self._items.get(key)
        if found is None or found[0] != stamp:
            return None
        self._items.move_to_end(key)
        return found[1]

    def put(self, host: str, run_id: str, stamp: RowStamp, summary: RunSummary) -> None:
        key = (host, run_id)
        self._items[key] = (stamp, summary)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


def _reason(host: str, message: str) -> str:
    """A LinkDown's message without its `host NAME: ` head (the row names the host)."""
    return message.removeprefix(f"host {host}: ")


def older_reason(host: str, result: RemoteResult) -> str | None:
    """When the verb there refused `--exact` (a ddconsole from before it, which would have
    taken the id as a prefix of another run's): saying so; else None."""
    refused = any(
        "unrecognized" in line and "--exact" in line for line in result.stderr.splitlines()
    )
    if result.exit_status == 0 or not refused:
        return None
    return f"the ddconsole on {host} is older and has no --exact; nothing was run there"


def _failed(what: str, result: RemoteResult) -> str:
    lines = result.stderr.strip().splitlines()
    last = lines[-1].removeprefix("ddconsole: ").strip() if lines else "no message"
    return f"{what} failed (exit {result.exit_status}): {last[:MAX_TEXT]}"


async def call_ddconsole(
    fleet: Fleet, host: str, args: list[str], timeout_s: float
) -> RemoteResult:
    """`ddconsole ARGS` on the host; RemoteRunError saying why it could not be run."""
    from console.fleet.link import STALE, LinkDown

    try:
        reason = fleet.summary(host).reason
        state = fleet.link_state(host)
    except KeyError:  # the fleet was built again without it (hosts.toml changed)
        raise RemoteRunError(f"{host} is not a host of this console's fleet") from None
    if state == STALE and reason:
        # The fleet's stream reconnects; a call now would only wait on the same dead link.
        raise RemoteRunError(f"stale: {_reason(host, reason)}")
    try:
        return await fleet.run(host, args, timeout_s)
    except LinkDown as exc:
        raise RemoteRunError(f"stale: {_reason(host, exc.message)}") from None
    except Exception as exc:  # whatever a host or its link does, the caller gets a reason
        raise RemoteRunError(f"{args[0]} {args[1]} failed: {type(exc).__name__}: {exc}") from None


async def fetch_runs(
    fleet: Fleet,
    host: str,
    previous: HostRuns | None = None,
    timeout_s: float = LIST_TIMEOUT_S,
    limit: int = MAX_PER_HOST,
) -> HostRuns:
    """The host's runs, newest first; when they cannot be had, `previous`'s rows with the
    reason in `error`."""
    kept = previous if previous is not None else HostRuns(host)
    try:
        result = await call_ddconsole(fleet, host, list(LIST_ARGS), timeout_s)
    except RemoteRunError as exc:
        return replace(kept, error=exc.message)
    if result.exit_status != 0:
        return replace(kept, error=_failed("runs list", result))
    try:
        rows, more, skipped = parse_run_list(result.stdout, limit)
    except ValueError as exc:
        return replace(kept, error=f"runs list gave no listing: {exc}")
    return HostRuns(host, tuple(rows), more, skipped, listed_wall=time.time())


def show_args(run_id: str) -> list[str]:
    """`runs show` of that very run (`--exact`: never another whose id starts with it), as
    JSON; the id after `--`, so it is read as the run whatever it looks like."""
    return ["runs", "show", "--exact", "--json", "--", run_id]


async def fetch_summary(
    fleet: Fleet, host: str, run_id: str, timeout_s: float = SHOW_TIMEOUT_S
) -> RunSummary:
    """The run's summary from the host; RemoteRunError with the reason when there is none."""
    if not valid_run_id(run_id):
        raise RemoteRunError(f"{run_id!r} is not a run id")
    result = await call_ddconsole(fleet, host, show_args(run_id), timeout_s)
    if result.exit_status != 0:
        older = older_reason(host, result)
        if older is not None:
            raise RemoteRunError(f"runs show {run_id}: {older}, so no other run was shown")
        raise RemoteRunError(_failed(f"runs show {run_id}", result))
    try:
        return parse_summary(result.stdout)
    except ValueError as exc:
        raise RemoteRunError(f"runs show {run_id} gave no summary: {exc}") from None
