"""Bench: load a ready server or start a campaign (a file, chosen cells, or the demo sweep),
and follow any running campaign live — including ones started elsewhere (detached).

With a fleet (hosts.toml names other hosts), the runs list gets a HOST column and each other
host's newest runs under this host's, listed there over SSH (console.fleet.remote_runs, as
the Runs screen lists them) in async workers; a remote run's levels are its `runs show
--json` there, cached until its row moves, and `x` stops it there. The targets list adds
every other host's ready servers from the fleet's readings: `g` on one starts the CLI's
`bench ... --detach` on that host (console.fleet.remote_bench). Campaigns run here only.
Nothing here waits on a host: a stale one is a row saying why.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from console.bench.demo_defaults import (
    DEMO_INPUT_LEN,
    DEMO_OUTPUT_LEN,
    DEMO_REQUESTS,
    DEMO_TUI_CONCURRENCY,
)
from console.bench.estimate import CellSpeed, estimate_bench, estimate_campaign, measured_speed
from console.bench.listing import LevelProgress, Progress, RunRow
from console.bench.request import BenchRequest, CampaignRequest
from console.bench.results import RunSummary
from console.bench.tables import SUMMARY_HEADERS, summary_rows
from console.core.errors import ConsoleError
from console.core.units import format_duration, format_index_set
from console.fleet import remote_bench
from console.fleet.hosts import LOCAL
from console.fleet.remote_runs import (
    HostRuns,
    RemoteRunError,
    RowStamp,
    SummaryCache,
    fetch_runs,
    fetch_summary,
    row_stamp,
)
from console.tui.backend import ActionRefused, Backend
from console.tui.bench_hosts import (
    Target,
    campaign_note,
    other_fleet,
    remote_bench_detail,
    remote_targets,
)
from console.tui.from_thread import call_live
from console.tui.remote_calls import remote_calls
from console.tui.remote_rows import parse_key, remote_hosts
from console.tui.screens.cells import CellsChoice, CellsScreen, parse_positive_ints
from console.tui.screens.find import FIND_BINDINGS, FindScreen
from console.tui.screens.modals import ConfirmScreen
from console.tui.screens.runs import (
    NOTE,
    host_notes,
    remote_key,
    split_key,
    stale_line,
    stale_status,
)
from console.tui.views import ServerView
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.finder import FindRow
from console.tui.widgets.run_tables import distinct_names, rows_table
from console.tui.worker_notice import noticed

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet

RECENT_RUNS = 8
MEASURED_RUNS = 30
"""Runs read (newest first) for the speed of a cell a live confirmation estimates."""
LIST_EVERY_S = 1.0
COLUMNS = ("RUN", "STATUS", "CELLS", "NOW")
# Under 110 columns the runs list has half the width: the run's name (the full id heads the
# levels below), cut with an ellipsis to the room left, then its status and cells.
NARROW_COLUMNS = ("NAME", "STATUS", "CELLS")
NARROW_BELOW = 110
REMOTE_EVERY_S = 30.0
"""How often another host's runs are listed again while the screen is shown..."""
REMOTE_RUNNING_EVERY_S = 5.0
"""...and how often while one of its runs is running (or one started here is awaited)."""
REMOTE_TICK_S = 2.5
"""How often the screen checks whether a host's listing is due (the app refreshes a screen
only when the backend's version moves, and a fleet of stale hosts moves nothing)."""
LOAD_DEFAULTS = {"concurrency": "1,4,16", "requests": "32", "input-len": "512", "output-len": "256"}
DEMO_LOAD_DEFAULTS = {
    "concurrency": ",".join(str(c) for c in DEMO_TUI_CONCURRENCY),
    "requests": str(DEMO_REQUESTS),
    "input-len": str(DEMO_INPUT_LEN),
    "output-len": str(DEMO_OUTPUT_LEN),
}
"""`g`'s load on a demo server: the CLI's demo load (console/bench/demo_defaults.py) at
two levels, about a minute against the slowest demo cell."""


def progress_bar(done: int, planned: int, width: int = 20) -> str:
    filled = 0 if planned <= 0 else min(width, round(width * done / planned))
    return "█" * filled + "░" * (width - filled)


class BenchScreen(FindScreen):
    TITLE = "Bench"
    DEFAULT_CSS = """
    BenchScreen #top { height: 2fr; min-height: 8; }
    BenchScreen #pickers { width: 1fr; }
    BenchScreen #pickers OptionList { height: 1fr; min-height: 3; border: none; padding: 0; }
    BenchScreen #pickers OptionList:focus { background-tint: $foreground 8%; }
    BenchScreen #active { width: 1fr; }
    BenchScreen #recent { height: 1fr; min-height: 4; }
    BenchScreen #load { height: 3; }
    BenchScreen #load Input { width: 1fr; min-width: 10; }
    BenchScreen #load Input#slo { width: 2fr; min-width: 14; }
    BenchScreen #load Label { padding: 1 0 0 1; }
    BenchScreen #levels { height: 3fr; border-top: solid $primary-darken-2; padding: 0 1; }
    BenchScreen .section { text-style: bold; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g", "bench", "Bench"),
        Binding("c", "campaign", "Campaign"),
        Binding("p", "cells", "Pick cells"),
        Binding("D", "demo", "Demo sweep"),
        Binding("x", "stop_run", "Stop run"),
        *FIND_BINDINGS,
    ]
    SORT_COLUMNS = ("RUN", "NAME", "STATUS", "CELLS")

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.runs: list[RunRow] = []
        self._listed_at = 0.0
        self._targets: list[str] = []
        self._columns: tuple[str, ...] = ()
        self._follow: str | None = None
        """A run started here: selected (its levels followed) once the list has it."""
        self._asking = False
        """A confirmation is being worked out or shown: a second `g` (`c`, `p`'s start,
        `D`) pressed before it appears asks nothing more (one dialog, one run)."""
        self._target_lines: list[str] = []
        """The targets list's lines as shown (with a fleet, a host's note may change)."""
        self.remote: dict[str, HostRuns] = {}
        """Other hosts' runs as last listed, by host (a fleet only)."""
        self._with_hosts = False
        """The runs list shows the HOST column (a fleet runs)."""
        self._fetching: set[str] = set()
        self._fetched_at: dict[str, float] = {}
        self._summaries = SummaryCache()
        self._remote_shown: tuple[str, RowStamp] | None = None
        """The remote run whose levels are shown (or being read), with its row's stamp."""
        self._remote_reading: tuple[str, int] | None = None
        """The remote run whose levels are being read, with that read's number: one read
        per run at a time, never cancelled by its host's listing moving."""
        self._reads = 0
        self._remote_failed: tuple[str, RowStamp] | None = None
        """The remote run (and row stamp) whose last read failed: read again once its row
        or its host's listing changes, not on every redraw."""

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="top"):
            with Vertical(id="pickers"):
                yield Static("ready servers (g: benchmark)", classes="section")
                yield OptionList(id="targets")
                yield Static("campaign files (c: run)", classes="section")
                yield OptionList(
                    *[Option(p.stem, id=str(p)) for p in self.backend.campaigns], id="campaigns"
                )
            with Vertical(id="active"):
                yield Static("runs (newest first)", classes="section")
                yield DataTable(id="recent", cursor_type="row")
                yield FilterBar(target="recent", placeholder="filter runs")
        load = DEMO_LOAD_DEFAULTS if self.backend.demo else LOAD_DEFAULTS
        with Horizontal(id="load"):
            yield Label("conc")
            yield Input(load["concurrency"], id="concurrency")
            yield Label("requests")
            yield Input(load["requests"], id="requests")
            yield Label("in")
            yield Input(load["input-len"], id="input-len")
            yield Label("out")
            yield Input(load["output-len"], id="output-len")
            yield Label("slo")
            yield Input("", placeholder="profile's", id="slo", classes="slo")
        with VerticalScroll(id="levels"):
            yield Static(Text("select a run to follow it", style="dim"), id="levels-text")

    def on_mount(self) -> None:
        self._show_runs([], force=True)
        self.set_interval(REMOTE_TICK_S, self._remote_tick)

    def on_resize(self) -> None:
        # After the refresh: the room left for NAME is measured on the table's new size.
        self.call_after_refresh(self._show_runs_again)

    def _show_runs_again(self) -> None:
        self._show_runs(self.runs, force=True)

    def _wanted_columns(self) -> tuple[str, ...]:
        return NARROW_COLUMNS if 0 < self.size.width < NARROW_BELOW else COLUMNS

    def refresh_data(self) -> None:
        if not self.is_mounted:
            return
        targets = [s for s in self.backend.servers() if s.state == "ready"]
        ids = [s.id for s in targets]
        fleet = other_fleet(self.backend)
        if fleet is not None:
            self._show_targets(fleet, targets)
        elif ids != self._targets or self._target_lines:
            self._targets = ids
            self._target_lines = []
            widget = self.query_one("#targets", OptionList)
            widget.clear_options()
            widget.add_options(
                # The id names the profile and layout already: the variant and port finish it.
                [Option(f"{s.id}  {s.variant}  :{s.port}", id=s.id) for s in targets]
                or [Option(Text("none ready: s, then n to launch", style="dim"), disabled=True)]
            )
            if targets:
                widget.highlighted = 0
        if (fleet is not None) != self._with_hosts:
            self._show_runs(self.runs, force=True)  # the HOST column comes (or goes)
        if fleet is not None and self.is_current:
            self._list_hosts(fleet)
        if time.monotonic() - self._listed_at >= LIST_EVERY_S:
            self._listed_at = time.monotonic()
            self._load_runs()

    def _show_targets(self, fleet: Fleet, local: list[ServerView]) -> None:
        """The targets list with a fleet: this host's ready servers, then each other host's
        (or why a host offers none), each line led by its host; the highlighted one stays."""
        remote = remote_targets(remote_hosts(fleet.summaries(), fleet.reading))
        options = [
            Option(Text.assemble((LOCAL, "bold"), f"  {s.id}  {s.variant}  :{s.port}"), id=s.id)
            for s in local
        ] or [Option(Text(f"{LOCAL}  none ready: s, then n to launch", style="dim"), disabled=True)]
        options += [Option(t.label, id=t.key, disabled=t.server is None) for t in remote]
        lines = [f"{o.id} {_plain(o.prompt)}" for o in options]
        keys = [s.id for s in local] + [t.key for t in remote if t.server is not None]
        self._targets = keys
        if lines == self._target_lines:
            return
        self._target_lines = lines
        widget = self.query_one("#targets", OptionList)
        kept = self._target_key()
        widget.clear_options()
        widget.add_options(options)
        enabled = [i for i, o in enumerate(options) if not o.disabled]
        at = next((i for i, o in enumerate(options) if o.id == kept and kept is not None), None)
        if at is not None or enabled:
            widget.highlighted = at if at is not None else enabled[0]

    def _target_key(self) -> str | None:
        """The highlighted target's key: a local server's id, else `remote:HOST/ID`."""
        widget = self.query_one("#targets", OptionList)
        if widget.highlighted is None or not self._targets:
            return None
        option = widget.get_option_at_index(widget.highlighted)
        return None if option.disabled or option.id is None else str(option.id)

    def _remote_target(self) -> Target | None:
        """The highlighted target when it is another host's server (as last read)."""
        key = self._target_key()
        parsed = parse_key(key) if key is not None else None
        fleet = other_fleet(self.backend)
        if parsed is None or parsed[1] is None or fleet is None:
            return None
        hosts = remote_hosts(fleet.summaries(), fleet.reading)
        return next((t for t in remote_targets(hosts) if t.key == key and t.server), None)

    @work(thread=True, exclusive=True, group="bench-runs")
    def _load_runs(self) -> None:
        rows = list(reversed(self.backend.runs()))[:RECENT_RUNS]
        call_live(self, self._show_runs, rows)

    def _show_runs(self, rows: list[RunRow], force: bool = False) -> None:
        table = self.query_one("#recent", DataTable)
        selected = self._selected_run()
        if self._follow is not None and self._follow in self._run_keys(rows):
            selected, self._follow = self._follow, None
            force = True
        if force or rows != self.runs:
            self.runs = rows
            fleet = other_fleet(self.backend)
            self._with_hosts = fleet is not None
            if fleet is not None:
                self._fill_hosts(table, fleet, selected)
            else:
                self._fill_here(table, rows, selected)
        run_id = self._selected_run()
        if run_id is not None:
            self._open(run_id)

    def _fill_here(self, table: DataTable[Any], rows: list[RunRow], selected: str | None) -> None:
        """The runs list of this host alone."""
        self._columns = self._wanted_columns()
        name_width = self._name_width(table, rows)
        names = distinct_names([(r.run_id, r.name or r.run_id) for r in rows], name_width)
        values: list[dict[str, str | Text]] = [
            {
                "RUN": row.run_id,
                "NAME": name,
                "STATUS": _status_text(row, narrow=self._columns == NARROW_COLUMNS),
                "CELLS": f"{row.cells_done}/{row.cells}",
                "NOW": _progress_text(row.progress, row.level),
            }
            for row, name in zip(rows, names, strict=True)
        ]
        # NAME is cut to the room left (and RUN absent) in the narrow list: the
        # filter reads the full id and name.
        found = [
            FindRow(row.run_id, cells, search=f"{row.run_id} {row.name or ''}")
            for row, cells in zip(rows, values, strict=True)
        ]
        self.fill_found(table, self._columns, found, selected, "runs")

    def _run_keys(self, rows: list[RunRow]) -> list[str]:
        """Every run's row key: this host's `rows`, then each other host's listed runs."""
        keys = [r.run_id for r in rows]
        for host, listed in self.remote.items():
            keys += [remote_key(host, r.run_id) for r in listed.rows[:RECENT_RUNS]]
        return keys

    def _fill_hosts(self, table: DataTable[Any], fleet: Fleet, selected: str | None) -> None:
        """The runs list with a fleet: this host's runs, then each other host's newest (as
        many as this host's at most), each row naming its host as the Runs screen does; a
        host that could not be listed is a note row, its runs as last read under it."""
        entries: list[tuple[str, str, RunRow | Text]] = [(r.run_id, LOCAL, r) for r in self.runs]
        for other in fleet.hosts:
            if other.name != LOCAL:
                entries += self._host_entries(other.name)
        stale = {host for host, runs in self.remote.items() if runs.error is not None}
        wide = self._wanted_columns()
        self._columns = ("HOST", *wide)
        narrow = wide == NARROW_COLUMNS
        rows = [row for _, _, row in entries if isinstance(row, RunRow)]
        host_width = max([len("HOST"), *(len(host) for _, host, _ in entries)])
        room = self._name_width(table, rows) - host_width - 2 * table.cell_padding
        names = iter(distinct_names([(r.run_id, r.name or r.run_id) for r in rows], max(8, room)))
        found: list[FindRow] = []
        for key, host, row in entries:
            follows = f"{host}{NOTE}error" if host in stale else None
            if isinstance(row, Text):
                cells: dict[str, str | Text] = dict.fromkeys(self._columns, "")
                cells |= {"HOST": host, wide[0]: row}
                lead = follows if follows != key else None
                found.append(FindRow(key, cells, search=row.plain, follows=lead, counted=False))
                continue
            status = _status_text(row, narrow=narrow)
            if host in stale:
                status = Text(stale_status(row.status), style="dim")
            cells = {
                "HOST": host,
                "RUN": row.run_id,
                "NAME": next(names),
                "STATUS": status,
                "CELLS": f"{row.cells_done}/{row.cells}",
                "NOW": "" if host in stale else _progress_text(row.progress, row.level),
            }
            if follows is not None:  # as last read: dimmed
                cells = {column: Text(str(cell), style="dim") for column, cell in cells.items()}
            search = f"{row.run_id} {row.name or ''}"
            found.append(FindRow(key, cells, search=search, follows=follows))
        self.fill_found(table, self._columns, found, selected, "runs")

    def _host_entries(self, host: str) -> list[tuple[str, str, RunRow | Text]]:
        """Another host's rows: why its listing is missing or old, then its newest runs."""
        listed = self.remote.get(host)
        head: list[tuple[str, str, RunRow | Text]] = []
        for key, text, _ in host_notes(listed, host):
            if key.endswith(("pending", "error")):
                style = "yellow" if key.endswith("error") else "dim"
                head.append((key, host, Text(text, style=style)))
        rows = listed.rows[:RECENT_RUNS] if listed is not None else ()
        return head + [(remote_key(host, row.run_id), host, row) for row in rows]

    def _name_width(self, table: DataTable[Any], rows: list[RunRow]) -> int:
        """Cells left for NAME (narrow list) once STATUS, CELLS and the padding are in."""
        status = max([len("STATUS"), *(_status_text(r, narrow=True).cell_len for r in rows)])
        cells = max([len("CELLS"), *(len(f"{r.cells_done}/{r.cells}") for r in rows)])
        padding = 2 * table.cell_padding * len(NARROW_COLUMNS)
        scrollbar = 2
        return max(8, table.size.width - status - cells - padding - scrollbar)

    def sort_columns(self) -> tuple[str, ...]:
        shown = tuple(c for c in self.SORT_COLUMNS if c in self._columns)
        return ("HOST", *shown) if "HOST" in self._columns else shown

    def apply_find(self) -> None:
        self._show_runs(self.runs, force=True)

    def _selected_run(self) -> str | None:
        table = self.query_one("#recent", DataTable)
        if not 0 <= table.cursor_row < table.row_count:
            return None
        return str(table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value)

    def on_data_table_row_highlighted(self) -> None:
        run_id = self._selected_run()
        if run_id is not None:
            self._open(run_id)

    def _open(self, key: str) -> None:
        """Show the levels of row `key`: this host's run read from disk in a thread,
        another host's read there."""
        host, run_id = split_key(key)
        if host is None:
            self._remote_shown = None
            self._load_levels(run_id)
        else:
            self._open_remote(key, host, run_id)

    # -- other hosts' runs ---------------------------------------------------------------

    def _remote_tick(self) -> None:
        fleet = other_fleet(self.backend)
        if fleet is not None and self.is_current:
            self._list_hosts(fleet)

    def _due_every(self, host: str) -> float:
        """How old a host's listing may get: running runs there (or one started here
        and not listed yet) are followed closely, the rest read now and then."""
        listed = self.remote.get(host)
        awaited = self._follow is not None and split_key(self._follow)[0] == host
        running = listed is not None and any(r.status == "running" for r in listed.rows)
        return REMOTE_RUNNING_EVERY_S if awaited or running else REMOTE_EVERY_S

    def _list_hosts(self, fleet: Fleet) -> None:
        """Start a listing of each other host whose last one is due (or that has none),
        one at a time per host."""
        now = time.monotonic()
        for host in fleet.hosts:
            name = host.name
            if name == LOCAL or name in self._fetching:
                continue
            if now - self._fetched_at.get(name, -math.inf) < self._due_every(name):
                continue
            self._fetched_at[name] = now
            self._fetching.add(name)
            self.run_worker(
                noticed(self, self._list_host(fleet, name), f"listing the runs on {name}"),
                group=f"bench-host-{name}",
                exit_on_error=False,
            )

    async def _list_host(self, fleet: Fleet, name: str) -> None:
        try:
            listed = await fetch_runs(fleet, name, self.remote.get(name), limit=RECENT_RUNS)
        finally:
            self._fetching.discard(name)
        if not self.is_mounted:
            return
        same = listed.same_rows(self.remote.get(name))
        self.remote[name] = listed  # kept even when unchanged: its time says how old it is
        if not same:
            failed = self._remote_failed
            if failed is not None and split_key(failed[0])[0] == name:
                self._remote_failed = None  # read again: a failed read may now pass
            self._show_runs(self.runs, force=True)

    def _remote_row(self, host: str, run_id: str) -> RunRow | None:
        listed = self.remote.get(host)
        if listed is None:
            return None
        return next((row for row in listed.rows if row.run_id == run_id), None)

    def _open_remote(self, key: str, host: str, run_id: str) -> None:
        """Show another host's run's levels (from the cache while its row is unchanged,
        else read there in a worker) or a note row's full text."""
        row = self._remote_row(host, run_id)
        if row is None:
            self._remote_shown = None
            note = next(
                (full for k, _, full in host_notes(self.remote.get(host), host) if k == key), None
            )
            self._show_levels(Text(note or f"{host}: {run_id}: no longer listed there", "yellow"))
            return
        stamp = row_stamp(row)
        cached = self._summaries.get(host, run_id, stamp)
        moved = self._remote_shown is None or self._remote_shown[0] != key
        self._remote_shown = (key, stamp)
        if cached is not None:
            # Drawn again: its host may have gone stale or come back since.
            self._show_levels(self._remote_view(host, cached, row))
            return
        if self._remote_reading is not None and self._remote_reading[0] == key:
            return  # its read goes on; once it is in, a row that moved since is read again
        if self._remote_failed == (key, stamp):
            return  # said why; read again when its row or its host's listing changes
        fleet = other_fleet(self.backend)
        if fleet is None:
            self._show_levels(Text(f"{host}: {run_id}: the fleet no longer runs", style="red"))
            return
        if moved:  # another run than the one shown: not its old levels while it is read
            self._show_levels(Text(f"reading {run_id} on {host}…", style="dim"))
        self._reads += 1
        self._remote_reading = (key, self._reads)
        self._read_remote(fleet, key, host, run_id, stamp, self._reads)

    @work(exclusive=True, group="bench-remote-levels", exit_on_error=False)
    async def _read_remote(
        self, fleet: Fleet, key: str, host: str, run_id: str, stamp: RowStamp, number: int
    ) -> None:
        """Read one remote run's levels (a read of another run cancels it: exclusive)."""
        try:
            summary = await fetch_summary(fleet, host, run_id)
        except RemoteRunError as exc:
            self._remote_failed = (key, stamp)
            if self._shows(key):
                self._show_levels(Text(f"{host}: {run_id}: {exc.message}", style="red"))
            return
        finally:
            if self._remote_reading == (key, number):
                self._remote_reading = None
        self._summaries.put(host, run_id, stamp, summary)
        if self._shows(key):
            row = self._remote_row(host, run_id)
            self._show_levels(self._remote_view(host, summary, row))
            if row is not None and row_stamp(row) != stamp:
                self._open_remote(key, host, run_id)  # it moved while read: read it again

    def _shows(self, key: str) -> bool:
        """Whether row `key` is selected and its levels are the ones shown."""
        shown = self._remote_shown
        return shown is not None and shown[0] == key and self._selected_run() == key

    def _remote_view(self, host: str, summary: RunSummary, row: RunRow | None) -> Group:
        """A remote run's levels under the host it runs on (and why it is as last read)."""
        where = Text.assemble(("on host ", "dim"), (host, "bold"))
        line = stale_line(self.remote.get(host), host, time.time())
        if line is not None:
            where.append(f"\n{line}", style="bold yellow")
        return Group(where, self._levels_view(summary, row))

    @work(thread=True, exclusive=True, group="bench-levels")
    def _load_levels(self, run_id: str) -> None:
        # Through the cache of record: a finished run is read once, not rebuilt every second.
        row = next((r for r in self.runs if r.run_id == run_id), None)
        try:
            summary = self.backend.run_summary(run_id)
        except ConsoleError as exc:  # one damaged run: said here, the screen goes on
            call_live(self, self._show_levels, Text(exc.message, style="red"))
            return
        if summary is None:
            why = row.error if row is not None and row.error else "no summary to show"
            call_live(self, self._show_levels, Text(f"{run_id}: {why}", style="red"))
            return
        call_live(self, self._show_levels, self._levels_view(summary, row))

    def _levels_view(self, summary: RunSummary, row: RunRow | None) -> Group:
        head = Text.assemble((summary.run_id, "bold"), f"  {summary.name or ''}  ")
        head.append(f"[{summary.status}]", style="yellow" if summary.status != "done" else "green")
        parts: list[Any] = [head]
        if row is not None and row.progress:
            parts.append(Text(_now_line(row.progress, row.level)))
        width = self.size.width
        parts.append(rows_table(SUMMARY_HEADERS, summary_rows(summary), width - 2))
        for finding in summary.findings:
            parts.append(Text(f"! {finding.kind}: {finding.message}", style="yellow"))
        return Group(*parts)

    def _show_levels(self, view: Any) -> None:
        # A worker's result can land after the screen left (the app closing): nothing to do.
        for text in self.query("#levels-text").results(Static):
            text.update(view)

    # -- actions -------------------------------------------------------------------------
    # Read-only consoles never get here: the app refuses these actions first.

    def _speed(self, cell: tuple[str, str, str]) -> CellSpeed | None:
        """A cell's decode speed where it is known: the demo simulator's own model, else
        the newest finished run that measured the cell (read on a worker thread)."""
        if self.backend.demo:
            from console.tui.sim_speed import sim_cell_speed

            return sim_cell_speed(self.backend.catalog, cell)
        return self._measured_speeds().get(cell)

    def _measured_speeds(self) -> dict[tuple[str, str, str], CellSpeed]:
        """Each cell's speed from the newest of the last runs on disk that measured it."""
        speeds: dict[tuple[str, str, str], CellSpeed] = {}
        for row in list(reversed(self.backend.runs()))[:MEASURED_RUNS]:
            if row.status == "running":
                continue
            try:
                summary = self.backend.run_summary(row.run_id)
            except ConsoleError:
                continue
            for cell in summary.cells if summary is not None else ():
                key = (cell.profile or "", cell.layout or "", cell.variant or "")
                speed = measured_speed(cell)
                if cell.profile and key not in speeds and speed is not None:
                    speeds[key] = speed
        return speeds

    def _campaign_estimate(self, request: CampaignRequest) -> str:
        """`4 cells × 1 level × 16 requests, about 6 min`; measured speeds do not know how
        long a real server takes to load, so a live estimate says it leaves that out."""
        if self.backend.demo:
            return estimate_campaign(request, self._speed).describe()
        speeds = self._measured_speeds()
        estimate = estimate_campaign(request, speeds.get)
        loads = " plus each server's load" if estimate.seconds is not None else ""
        return estimate.describe() + loads

    def _gpus_of(self, request: CampaignRequest) -> str:
        """The GPUs a campaign's servers will hold (its override, else each layout's)."""
        spec = request.spec
        if spec.gpus:
            return format_index_set(list(spec.gpus))
        gpus: set[int] = set()
        for cell in spec.cell_list():
            try:
                gpus |= set(
                    self.backend.catalog.get(cell.profile).profile.layouts[cell.layout].gpus
                )
            except (ConsoleError, KeyError):
                continue
        return format_index_set(sorted(gpus)) if gpus else "-"

    def action_bench(self) -> None:
        targets = self.query_one("#targets", OptionList)
        if targets.highlighted is None or not self._targets:
            self.notify(
                "no ready server: launch one on the Servers screen (s, n)", severity="warning"
            )
            return
        if self._with_targets_of_hosts():
            key = self._target_key()
            if key is None:
                self.notify("highlight a ready server first", severity="warning")
                return
            if parse_key(key) is not None:
                self._bench_remote(key)
                return
            server_id = key
        else:
            server_id = self._targets[targets.highlighted]
        server = next((s for s in self.backend.servers() if s.id == server_id), None)
        request = self._load_request(server_id)
        if request is None:
            return

        def ask() -> tuple[str, str]:
            speed = (
                None
                if server is None
                else self._speed((server.profile, server.layout, server.variant))
            )
            label = f"{server.label} on :{server.port}" if server is not None else server_id
            return (
                f"Benchmark {server_id}?",
                f"{label}: {estimate_bench(request, speed).describe()} "
                f"({request.input_len} in, {request.output_len} out). It runs detached; "
                "x on its row stops it.",
            )

        self._confirm(ask, lambda: self.backend.start_bench(request), f"benchmark of {server_id}")

    def _with_targets_of_hosts(self) -> bool:
        """Whether the targets list is the fleet's (lines led by their host, notes between)."""
        return bool(self._target_lines)

    def _load_request(self, server_id: str) -> BenchRequest | None:
        """`g`'s request from the load fields; None (said) when a field is wrong."""
        try:
            request = BenchRequest(
                server_id=server_id,
                concurrency=parse_positive_ints(
                    self.query_one("#concurrency", Input).value, "concurrency"
                ),
                requests=parse_positive_ints(self.query_one("#requests", Input).value, "requests")[
                    0
                ],
                input_len=parse_positive_ints(self.query_one("#input-len", Input).value, "in")[0],
                output_len=parse_positive_ints(self.query_one("#output-len", Input).value, "out")[
                    0
                ],
                slo=self.query_one("#slo", Input).value.strip() or None,
            ).validate()
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return None
        except ConsoleError as exc:
            self.notify(exc.message, severity="error")
            return None
        return request

    def _bench_remote(self, key: str) -> None:
        """`g` on another host's server: the same load, started there by its CLI."""
        target = self._remote_target()
        if target is None or target.server is None:
            self.notify(f"{key.removeprefix('remote:')} is no longer ready", severity="warning")
            return
        host, server = target.host, target.server
        request = self._load_request(server.id)
        if request is None:
            return
        try:
            args, left = remote_bench.bench_args(request)
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return
        demo = self.backend.demo

        def ask() -> tuple[str, str]:
            speed = None
            if demo and server.profile and server.layout and server.variant:
                # The demo hosts simulate the same catalogue's cells: the same model.
                speed = self._speed((server.profile, server.layout, server.variant))
            # As a local server's label reads: profile, layout, variant.
            parts = (server.profile, server.layout, server.variant)
            label = " ".join(p for p in parts if p) or server.id
            estimate = estimate_bench(request, speed).describe()
            return (
                f"Benchmark {server.id} on {host}?",
                f"{host}: {label} on :{server.port or '-'}: {estimate} ({request.input_len} in, "
                f"{request.output_len} out).\n{remote_bench_detail(host, args[:-1], left)}",
            )

        self._confirm_then(ask, lambda: self._start_remote(host, request))

    def _start_remote(self, host: str, request: BenchRequest) -> None:
        """Start the benchmark there; q asks first while it runs (quitting would end it)."""
        remote_calls(self.app).start(host, request.server_id or "-", "bench")
        self._start_remote_work(host, request)

    @work(group="bench-start", exit_on_error=False)
    async def _start_remote_work(self, host: str, request: BenchRequest) -> None:
        what = f"benchmark of {request.server_id} on {host}"
        try:
            await self._start_remote_body(host, request, what)
        except Exception as exc:  # the worker must report, not end silently
            self.notify(f"{what}: {type(exc).__name__}: {exc}", severity="error", timeout=10)
        finally:
            remote_calls(self.app).end(host, request.server_id or "-")

    async def _start_remote_body(self, host: str, request: BenchRequest, what: str) -> None:
        fleet = other_fleet(self.backend)
        if fleet is None:
            self.notify(f"{what}: the fleet no longer runs", severity="error")
            return
        self.notify(f"starting {what}…", timeout=2)
        started = await remote_bench.start_bench(fleet, host, request)
        if not self.is_mounted:
            return
        if not started.ok or started.run_id is None:
            hint = f"; by hand: {started.hint}" if started.hint else ""
            self.notify(started.message + hint, severity="error", timeout=10)
            return
        self.notify(f"{what}: {started.message}")
        self._follow = remote_key(host, started.run_id)
        self._fetched_at.pop(host, None)  # listed again now, then closely while it runs
        self._show_runs(self.runs)  # selected now when a listing in flight had it already
        self._remote_tick()

    def _campaign_note(self) -> str:
        """A campaign confirmation's first line while another host's server is
        highlighted: campaigns run here only."""
        target = self._remote_target() if self._with_targets_of_hosts() else None
        return "" if target is None else campaign_note(target.host) + "\n"

    def action_campaign(self) -> None:
        files = self.query_one("#campaigns", OptionList)
        if files.highlighted is None:
            self.notify("no campaign files found", severity="warning")
            return
        option = files.get_option_at_index(files.highlighted)
        path = Path(str(option.id))
        loaded: list[CampaignRequest] = []
        note = self._campaign_note()

        def ask() -> tuple[str, str]:
            request = CampaignRequest.from_file(path)
            loaded.append(request)
            return (
                f"Run campaign {path.stem}?",
                f"{note}{path}\n{self._campaign_estimate(request)}; servers on "
                f"GPUs {self._gpus_of(request)}. Each cell launches its server, loads it and "
                "stops it; servers holding the same GPUs are in the way. It runs detached "
                "and keeps going if you quit; x on its row stops it.",
            )

        self._confirm(ask, lambda: self.backend.start_campaign(loaded[-1]), f"campaign {path.stem}")

    def action_cells(self) -> None:
        def chosen(choice: CellsChoice | None) -> None:
            if choice is None:
                return
            try:
                request = CampaignRequest.from_cells(
                    choice.cells, concurrency=choice.concurrency, requests=choice.requests
                )
            except ConsoleError as exc:
                self.notify(exc.message, severity="error")
                return
            note = self._campaign_note()
            names = ", ".join("/".join(cell) for cell in choice.cells[:6])
            more = f" and {len(choice.cells) - 6} more" if len(choice.cells) > 6 else ""

            def ask() -> tuple[str, str]:
                return (
                    f"Run {len(choice.cells)} chosen cell(s)?",
                    f"{note}{self._campaign_estimate(request)}; servers on GPUs "
                    f"{self._gpus_of(request)}.\n{names}{more}\nEach cell launches its "
                    "server, loads it and stops it; it runs detached.",
                )

            self._confirm(
                ask, lambda: self.backend.start_campaign(request), "campaign of chosen cells"
            )

        self.app.push_screen(CellsScreen(self.backend.catalog), chosen)

    def action_demo(self) -> None:
        placed: list[CampaignRequest] = []
        note = self._campaign_note()

        def ask() -> tuple[str, str]:
            request = self.backend.demo_campaign()
            placed.append(request)
            return (
                "Run the demo campaign (DDTree budget sweep)?",
                f"{note}{self._campaign_estimate(request)}; its server on GPU "
                f"{self._gpus_of(request)}, port {request.spec.port}. It runs detached; x on "
                "its row stops it.",
            )

        self._confirm(
            ask,
            lambda: self.backend.start_campaign(placed[-1]),
            "demo campaign (DDTree budget sweep)",
        )

    def action_stop_run(self) -> None:
        run_id = self._selected_run()
        host = None if run_id is None else split_key(run_id)[0]
        if host is not None and run_id is not None:
            row = self._remote_row(host, split_key(run_id)[1])
        else:
            row = next((r for r in self.runs if r.run_id == run_id), None)
        if row is None:
            self.notify("select a run in the runs list first", severity="warning")
            return
        there = f" on {host}" if host is not None else ""
        if row.status != "running":
            self.notify(
                f"run {row.run_id}{there} is {row.status}: nothing to stop", severity="warning"
            )
            return
        campaign = row.kind == "campaign"
        what = "campaign" if campaign else "benchmark"
        where = f"\n{_now_line(row.progress, row.level)}" if row.progress else ""
        outcome = (
            "the servers it launched are stopped and it can be resumed"
            if campaign
            else "the server it measures keeps running"
        )
        detail = (
            f"{row.run_id}: {row.cells_done}/{row.cells} cells done{where}\nThe level in "
            f"progress is recorded as interrupted and the summary kept; {outcome}."
        )

        def confirmed(yes: bool | None) -> None:
            if yes and host is not None:
                remote_calls(self.app).start(host, row.run_id, "runs stop")  # q asks first
                self._stop_remote(host, row.run_id)
            elif yes:
                self._stop_run(row.run_id)

        if host is not None:
            line = stale_line(self.remote.get(host), host, time.time())
            stale = f"\n{line}" if line is not None else ""
            detail = f"On {host}: {detail}{stale}"
        self.app.push_screen(
            ConfirmScreen(f"Stop {what} {row.name or row.run_id}{there}?", detail), confirmed
        )

    @work(group="bench-stop", exit_on_error=False)
    async def _stop_remote(self, host: str, run_id: str) -> None:
        try:
            await self._stop_remote_body(host, run_id)
        except Exception as exc:  # the worker must report, not end silently
            self.notify(
                f"stop {run_id} on {host}: {type(exc).__name__}: {exc}",
                severity="error",
                timeout=10,
            )
        finally:
            remote_calls(self.app).end(host, run_id)

    async def _stop_remote_body(self, host: str, run_id: str) -> None:
        fleet = other_fleet(self.backend)
        if fleet is None:
            self.notify(f"stop {run_id} on {host}: the fleet no longer runs", severity="error")
            return
        self.notify(f"stopping run {run_id} on {host}…", timeout=3)
        ok, message = await remote_bench.stop_run(fleet, host, run_id)
        if not self.is_mounted:
            return
        self.notify(message, severity="information" if ok else "error", timeout=10)
        self._fetched_at.pop(host, None)  # its stopped run listed again now
        self._remote_tick()

    @work(thread=True, group="bench-stop")
    def _stop_run(self, run_id: str) -> None:
        def progress(line: str) -> None:
            call_live(self, self.notify, line, timeout=3)

        try:
            message = self.backend.stop_run(run_id, progress)
        except ActionRefused as exc:
            call_live(self, self.notify, exc.message, severity="error")
            return
        except Exception as exc:  # the worker must report, not die silently
            call_live(self, self.notify, f"{type(exc).__name__}: {exc}", severity="error")
            return
        call_live(self, self.notify, message, timeout=10)
        call_live(self, self._relist)

    def _relist(self) -> None:
        """Read the runs list again on the next refresh (on the event loop: the screen's
        state is written there only, never from a worker thread)."""
        self._listed_at = 0.0

    def _follow_run(self, run_id: str) -> None:
        """Select a run started here once the list has it (on the event loop)."""
        self._follow = run_id
        self._listed_at = 0.0

    def _confirm(
        self, ask: Callable[[], tuple[str, str]], action: Callable[[], str], what: str
    ) -> None:
        """Ask once: while a confirmation is worked out or shown, another is not."""
        self._confirm_then(ask, lambda: self._start(action, what))

    def _confirm_then(
        self, ask: Callable[[], tuple[str, str]], start: Callable[[], object]
    ) -> None:
        """Ask once, then `start` (on the event loop) on yes."""
        if self._asking:
            return
        self._asking = True
        self._ask(ask, start)

    def _done_asking(self) -> None:
        self._asking = False

    @work(thread=True, group="bench-confirm")
    def _ask(self, ask: Callable[[], tuple[str, str]], start: Callable[[], object]) -> None:
        """Work out what the action will do (its estimate reads profiles and campaign
        files), ask, and start it on yes."""
        try:
            title, detail = ask()
        except (ActionRefused, ConsoleError) as exc:
            call_live(self, self._done_asking)
            call_live(self, self.notify, exc.message, severity="error")
            return
        except Exception:  # the guard must not stay up, or no action could ask again
            call_live(self, self._done_asking)
            raise

        def answered(yes: bool | None) -> None:
            self._done_asking()
            if yes:
                start()

        call_live(self, self.app.push_screen, ConfirmScreen(title, detail), answered)

    @work(thread=True, group="bench-start")
    def _start(self, action: Callable[[], str], what: str) -> None:
        call_live(self, self.notify, f"starting {what}…", timeout=2)
        try:
            run_id = action()
        except (ActionRefused, ConsoleError) as exc:
            call_live(self, self.notify, exc.message, severity="error")
            return
        except Exception as exc:
            call_live(self, self.notify, f"{type(exc).__name__}: {exc}", severity="error")
            return
        call_live(self, self.notify, f"{what}: run {run_id} (detached)")
        call_live(self, self._follow_run, run_id)


def _plain(prompt: object) -> str:
    return prompt.plain if isinstance(prompt, Text) else str(prompt)


def _eta(level: LevelProgress | None) -> str:
    return "" if level is None or level.eta_s is None else f"ETA {_seconds(level.eta_s)}"


def _seconds(seconds: float) -> str:
    """`31s`, `2m05s`: an ETA to the second."""
    return f"{seconds:.0f}s" if seconds < 59.5 else format_duration(seconds)


def _status_text(row: RunRow, *, narrow: bool) -> Text:
    """The status; a running row with a level in progress says how far it is, in the
    narrow list too (where there is no NOW column)."""
    if row.status != "running":
        return Text(row.status)
    level = row.level
    if not narrow or level is None:
        return Text(row.status, style="bold yellow")
    total = "?" if level.total is None else str(level.total)
    left = "" if level.eta_s is None else f" {_seconds(level.eta_s)}"
    return Text(f"▶{level.completed}/{total}{left}", style="bold yellow")


def _level_numbers(level: LevelProgress) -> str:
    """`12/32 · 151.2 tok/s · 1 err · ETA 1m20s`."""
    total = "?" if level.total is None else str(level.total)
    parts = [f"{level.completed}/{total}"]
    if level.output_tok_s is not None:
        parts.append(f"{level.output_tok_s:.1f} tok/s")
    parts.append(f"{level.errors} err")
    if level.eta_s is not None:
        parts.append(_eta(level))
    return " · ".join(parts)


def _progress_text(progress: Progress | None, level: LevelProgress | None) -> str:
    """The NOW column, short enough for the runs list's half of the screen:
    `ddtree-b15 L2/3 12/32 151.2 tok/s 1 err ETA 1m20s` (the cell by its variant)."""
    if not progress:
        return ""
    variant = (progress.cell or "").rsplit("/", 1)[-1]
    if progress.phase is not None:
        return f"{variant} {progress.phase}{_run_eta(progress)}"
    if level is None:
        return f"{variant} L{progress.level} {progress.done}/{progress.planned}"
    total = "?" if level.total is None else str(level.total)
    parts = [variant, f"L{level.position('/')}", f"{level.completed}/{total}"]
    if level.output_tok_s is not None:
        parts.append(f"{level.output_tok_s:.1f} tok/s")
    if level.errors:
        parts.append(f"{level.errors} err")
    if level.eta_s is not None:
        parts.append(_eta(level))
    return " ".join(parts) + _run_eta(progress, level)


def _run_eta(progress: Progress, level: LevelProgress | None = None) -> str:
    """` · run ETA 3m10s` when the run goes on after what runs now, else nothing."""
    left = progress.run_eta_s
    if left is None or (level is not None and level.eta_s is not None and left <= level.eta_s + 1):
        return ""
    return f" · run ETA {_seconds(left)}"


def _now_line(progress: Progress | None, level: LevelProgress | None) -> str:
    """The run detail's line on the level in progress, with its live numbers when the
    runner writes them."""
    if progress is None:
        return ""
    if progress.phase is not None:
        return f"now: {progress.cell} {progress.phase}{_run_eta(progress)}"
    if level is None:
        return (
            f"now: {progress.cell} level {progress.level}  "
            f"{progress_bar(progress.done, progress.planned)} "
            f"{progress.done}/{progress.planned} requests"
        )
    done, planned = level.completed, level.total or 0
    return (
        f"now: {progress.cell} level {level.position('/')} ({level.label})  "
        f"{progress_bar(done, planned)} {_level_numbers(level)} · "
        f"{format_duration(level.elapsed_s)} elapsed{_run_eta(progress, level)}"
    )
