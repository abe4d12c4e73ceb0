"""Bench: load a ready server or start a campaign (a file, chosen cells, or the demo sweep),
and follow any running campaign live — including ones started elsewhere (detached).

With a fleet (hosts.toml names other hosts), the runs list gets a HOST column and each other
host's newest runs under this host's, and the targets list adds every other host's ready
servers from the fleet's readings; `g` on one starts the benchmark there, `x` on another
host's run stops it there (the calls and their state: console/tui/screens/bench_remote.py).
Campaigns run here only. Nothing here waits on a host: a stale one is a row saying why.
"""

from __future__ import annotations

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
from console.bench.listing import RunRow
from console.bench.request import BenchRequest, CampaignRequest
from console.bench.results import RunSummary
from console.bench.tables import SUMMARY_HEADERS, summary_rows
from console.core.errors import ConsoleError
from console.core.units import format_index_set
from console.fleet.hosts import LOCAL
from console.tui.backend import ActionRefused, Backend
from console.tui.bench_hosts import other_fleet
from console.tui.from_thread import call_live
from console.tui.remote_rows import parse_key
from console.tui.remote_run_list import (
    NOTE,
    host_notes,
    remote_key,
    split_key,
    stale_line,
    stale_status,
)
from console.tui.run_rows_format import now_line, progress_text, status_text
from console.tui.screens.bench_remote import RECENT_RUNS, BenchHosts
from console.tui.screens.cells import CellsChoice, CellsScreen, parse_positive_ints
from console.tui.screens.find import FIND_BINDINGS
from console.tui.screens.modals import ConfirmScreen
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.finder import FindRow
from console.tui.widgets.run_tables import distinct_names, rows_table

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet

# The names the Bench screen's tests import from it.
_now_line, _progress_text = now_line, progress_text

MEASURED_RUNS = 30
"""Runs read (newest first) for the speed of a cell a live confirmation estimates."""
LIST_EVERY_S = 1.0
COLUMNS = ("RUN", "STATUS", "CELLS", "NOW")
# Under 110 columns the runs list has half the width: the run's name (the full id heads the
# levels below), cut with an ellipsis to the room left, then its status and cells.
NARROW_COLUMNS = ("NAME", "STATUS", "CELLS")
NARROW_BELOW = 110
LOAD_DEFAULTS = {"concurrency": "1,4,16", "requests": "32", "input-len": "512", "output-len": "256"}
DEMO_LOAD_DEFAULTS = {
    "concurrency": ",".join(str(c) for c in DEMO_TUI_CONCURRENCY),
    "requests": str(DEMO_REQUESTS),
    "input-len": str(DEMO_INPUT_LEN),
    "output-len": str(DEMO_OUTPUT_LEN),
}
"""`g`'s load on a demo server: the CLI's demo load (console/bench/demo_defaults.py) at
two levels, about a minute against the slowest demo cell."""


class BenchScreen(BenchHosts):
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
        self.runs = []
        self._listed_at = 0.0
        self._columns: tuple[str, ...] = ()
        self._follow = None
        self._asking = False
        """A confirmation is being worked out or shown: a second `g` (`c`, `p`'s start,
        `D`) pressed before it appears asks nothing more (one dialog, one run)."""
        self._with_hosts = False
        """The runs list shows the HOST column (a fleet runs)."""

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
        self._start_remote_ticks()

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
                "STATUS": status_text(row, narrow=self._columns == NARROW_COLUMNS),
                "CELLS": f"{row.cells_done}/{row.cells}",
                "NOW": progress_text(row.progress, row.level),
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
            status = status_text(row, narrow=narrow)
            if host in stale:
                status = Text(stale_status(row.status), style="dim")
            cells = {
                "HOST": host,
                "RUN": row.run_id,
                "NAME": next(names),
                "STATUS": status,
                "CELLS": f"{row.cells_done}/{row.cells}",
                "NOW": "" if host in stale else progress_text(row.progress, row.level),
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
        status = max([len("STATUS"), *(status_text(r, narrow=True).cell_len for r in rows)])
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
            parts.append(Text(now_line(row.progress, row.level)))
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
            row = self.listings.row(host, split_key(run_id)[1])
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
        where = f"\n{now_line(row.progress, row.level)}" if row.progress else ""
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
