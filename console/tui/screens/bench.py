"""Bench: load a ready server or start a campaign (a file, chosen cells, or the demo sweep),
and follow any running campaign live — including ones started elsewhere (detached)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from console.bench.listing import Progress, RunRow
from console.bench.request import BenchRequest, CampaignRequest
from console.bench.results import RunSummary
from console.bench.tables import SUMMARY_HEADERS, summary_rows
from console.core.errors import ConsoleError
from console.tui.backend import ActionRefused, Backend
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.cells import CellsChoice, CellsScreen, parse_positive_ints
from console.tui.screens.modals import ConfirmScreen
from console.tui.widgets.filled_table import fill_table
from console.tui.widgets.run_tables import rows_table

RECENT_RUNS = 8
LIST_EVERY_S = 1.0
COLUMNS = ("RUN", "STATUS", "CELLS", "NOW")
# Under 110 columns the runs list has half the width: the run's name (the full id heads the
# levels below), cut with an ellipsis to the room left, then its status and cells.
NARROW_COLUMNS = ("NAME", "STATUS", "CELLS")
NARROW_BELOW = 110


def progress_bar(done: int, planned: int, width: int = 20) -> str:
    filled = 0 if planned <= 0 else min(width, round(width * done / planned))
    return "█" * filled + "░" * (width - filled)


class BenchScreen(ConsoleScreen):
    TITLE = "Bench"
    DEFAULT_CSS = """
    BenchScreen #top { height: 2fr; min-height: 8; }
    BenchScreen #pickers { width: 1fr; }
    BenchScreen #pickers OptionList { height: 1fr; }
    BenchScreen #active { width: 1fr; }
    BenchScreen #load { height: 3; }
    BenchScreen #load Input { width: 1fr; }
    BenchScreen #load Label { padding: 1 0 0 1; }
    BenchScreen #levels { height: 3fr; border-top: solid $primary-darken-2; padding: 0 1; }
    BenchScreen .section { text-style: bold; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g", "bench", "Bench server"),
        Binding("c", "campaign", "Run campaign"),
        Binding("p", "cells", "Pick cells"),
        Binding("D", "demo", "Demo campaign"),
    ]

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.runs: list[RunRow] = []
        self._listed_at = 0.0
        self._targets: list[str] = []
        self._columns: tuple[str, ...] = ()

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
        with Horizontal(id="load"):
            yield Label("concurrency")
            yield Input("1,4,16", id="concurrency")
            yield Label("requests")
            yield Input("32", id="requests")
            yield Label("in")
            yield Input("512", id="input-len")
            yield Label("out")
            yield Input("256", id="output-len")
        with VerticalScroll(id="levels"):
            yield Static(Text("select a run to follow it", style="dim"), id="levels-text")

    def on_mount(self) -> None:
        self._show_runs([], force=True)

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
        if ids != self._targets:
            self._targets = ids
            widget = self.query_one("#targets", OptionList)
            widget.clear_options()
            widget.add_options(
                [Option(f"{s.id}  {s.label}  :{s.port}", id=s.id) for s in targets]
                or [Option(Text("none ready: s, then n to launch", style="dim"), disabled=True)]
            )
            if targets:
                widget.highlighted = 0
        if time.monotonic() - self._listed_at >= LIST_EVERY_S:
            self._listed_at = time.monotonic()
            self._load_runs()

    @work(thread=True, exclusive=True, group="bench-runs")
    def _load_runs(self) -> None:
        rows = list(reversed(self.backend.runs()))[:RECENT_RUNS]
        self.app.call_from_thread(self._show_runs, rows)

    def _show_runs(self, rows: list[RunRow], force: bool = False) -> None:
        table = self.query_one("#recent", DataTable)
        selected = self._selected_run()
        if force or rows != self.runs:
            self.runs = rows
            self._columns = self._wanted_columns()
            name_width = self._name_width(table, rows)
            values: list[dict[str, str | Text]] = [
                {
                    "RUN": row.run_id,
                    "NAME": _cut(row.name or row.run_id, name_width),
                    "STATUS": Text(
                        row.status, style="bold yellow" if row.status == "running" else ""
                    ),
                    "CELLS": f"{row.cells_done}/{row.cells}",
                    "NOW": _progress_text(row.progress),
                }
                for row in rows
            ]
            fill_table(
                table,
                self._columns,
                [
                    (row.run_id, [cells[c] for c in self._columns])
                    for row, cells in zip(rows, values, strict=True)
                ],
            )
            ids = [r.run_id for r in rows]
            if selected in ids:
                table.move_cursor(row=ids.index(selected))
        run_id = self._selected_run()
        if run_id is not None:
            self._load_levels(run_id)

    def _name_width(self, table: DataTable[Any], rows: list[RunRow]) -> int:
        """Cells left for NAME (narrow list) once STATUS, CELLS and the padding are in."""
        status = max([len("STATUS"), *(len(r.status) for r in rows)])
        cells = max([len("CELLS"), *(len(f"{r.cells_done}/{r.cells}") for r in rows)])
        padding = 2 * table.cell_padding * len(NARROW_COLUMNS)
        scrollbar = 2
        return max(8, table.size.width - status - cells - padding - scrollbar)

    def _selected_run(self) -> str | None:
        table = self.query_one("#recent", DataTable)
        if not self.runs or not 0 <= table.cursor_row < len(self.runs):
            return None
        return self.runs[table.cursor_row].run_id

    def on_data_table_row_highlighted(self) -> None:
        run_id = self._selected_run()
        if run_id is not None:
            self._load_levels(run_id)

    @work(thread=True, exclusive=True, group="bench-levels")
    def _load_levels(self, run_id: str) -> None:
        # Through the cache of record: a finished run is read once, not rebuilt every second.
        row = next((r for r in self.runs if r.run_id == run_id), None)
        try:
            summary = self.backend.run_summary(run_id)
        except ConsoleError as exc:  # one damaged run: said here, the screen goes on
            self.app.call_from_thread(self._show_levels, Text(exc.message, style="red"))
            return
        if summary is None:
            why = row.error if row is not None and row.error else "no summary to show"
            self.app.call_from_thread(self._show_levels, Text(f"{run_id}: {why}", style="red"))
            return
        self.app.call_from_thread(self._show_levels, self._levels_view(summary, row))

    def _levels_view(self, summary: RunSummary, row: RunRow | None) -> Group:
        head = Text.assemble((summary.run_id, "bold"), f"  {summary.name or ''}  ")
        head.append(f"[{summary.status}]", style="yellow" if summary.status != "done" else "green")
        parts: list[Any] = [head]
        if row is not None and row.progress:
            progress = row.progress
            parts.append(
                Text(
                    f"now: {progress.cell} level {progress.level}  "
                    f"{progress_bar(progress.done, progress.planned)} "
                    f"{progress.done}/{progress.planned} requests"
                )
            )
        width = self.size.width
        parts.append(rows_table(SUMMARY_HEADERS, summary_rows(summary), width - 2))
        for finding in summary.findings:
            parts.append(Text(f"! {finding.kind}: {finding.message}", style="yellow"))
        return Group(*parts)

    def _show_levels(self, view: Any) -> None:
        self.query_one("#levels-text", Static).update(view)

    # -- actions -------------------------------------------------------------------------

    def _read_only(self) -> bool:
        if self.backend.read_only:
            self.notify("read-only: this is a replay", severity="warning")
            return True
        return False

    def action_bench(self) -> None:
        if self._read_only():
            return
        targets = self.query_one("#targets", OptionList)
        if targets.highlighted is None or not self._targets:
            self.notify(
                "no ready server: launch one on the Servers screen (s, n)", severity="warning"
            )
            return
        server_id = self._targets[targets.highlighted]
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
            )
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return
        self._start(lambda: self.backend.start_bench(request), f"benchmark of {server_id}")

    def action_campaign(self) -> None:
        if self._read_only():
            return
        files = self.query_one("#campaigns", OptionList)
        if files.highlighted is None:
            self.notify("no campaign files found", severity="warning")
            return
        option = files.get_option_at_index(files.highlighted)
        path = Path(str(option.id))

        def start() -> str:
            return self.backend.start_campaign(CampaignRequest.from_file(path))

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._start(start, f"campaign {path.stem}")

        self.app.push_screen(
            ConfirmScreen(
                f"Run campaign {path.stem}?",
                f"{path}\nEach cell launches its server, loads it and stops it; servers "
                "holding the same GPUs are in the way. It runs detached and keeps going if "
                "you quit.",
            ),
            confirmed,
        )

    def action_cells(self) -> None:
        if self._read_only():
            return

        def chosen(choice: CellsChoice | None) -> None:
            if choice is None:
                return
            request = CampaignRequest.from_cells(
                choice.cells, concurrency=choice.concurrency, requests=choice.requests
            )
            self._start(lambda: self.backend.start_campaign(request), "campaign of chosen cells")

        self.app.push_screen(CellsScreen(self.backend.catalog), chosen)

    def action_demo(self) -> None:
        if self._read_only():
            return

        def start() -> str:
            return self.backend.start_campaign(self.backend.demo_campaign())

        self._start(start, "demo campaign (DDTree budget sweep)")

    @work(thread=True, group="bench-start")
    def _start(self, action: Any, what: str) -> None:
        self.app.call_from_thread(self.notify, f"starting {what}…", timeout=2)
        try:
            run_id = action()
        except (ActionRefused, ConsoleError) as exc:
            self.app.call_from_thread(self.notify, exc.message, severity="error")
            return
        except Exception as exc:
            self.app.call_from_thread(self.notify, f"{type(exc).__name__}: {exc}", severity="error")
            return
        self.app.call_from_thread(self.notify, f"{what}: run {run_id} (detached)")
        self._listed_at = 0.0


def _cut(name: str, width: int) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _progress_text(progress: Progress | None) -> str:
    if not progress:
        return ""
    return f"{progress.cell} L{progress.level} {progress.done}/{progress.planned}"
