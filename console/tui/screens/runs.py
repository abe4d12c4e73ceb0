"""Runs: every run the backend serves, one run's results, and two runs side by side.

Runs and summaries come from the backend (the results folder live, the recording in a
replay); the summaries through their cache of record, so a finished run is read, not rebuilt.
The selected run's detail is read again when its row changes or, live, when its files do
(checked by their size and mtime on the list's timer, never every frame).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Static

from console.bench.compare import CompareResult, compare_runs
from console.bench.listing import RunRow
from console.bench.results import RunSummary
from console.core.errors import ConsoleError
from console.tui.backend import Backend
from console.tui.screens.find import FIND_BINDINGS, FindScreen
from console.tui.widgets.accept_hist import acceptance_view
from console.tui.widgets.filled_table import fill_table
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.finder import FindRow
from console.tui.widgets.run_tables import compare_view, distinct_names, summary_view

# How often the list is re-read from disk while shown (runs change only through campaigns).
LIST_EVERY_S = 2.0
# The run id starts with its creation time and ends with its name.
COLUMNS = ("RUN", "KIND", "STATUS", "CELLS")
RUN_FILES = ("run.json", "summary.json", "levels.jsonl")
"""The files whose change means a run's detail is out of date."""

FileStamp = tuple[tuple[int, int] | None, ...]


def run_files_stamp(root: Path, run_id: str) -> FileStamp:
    """Each of the run's `RUN_FILES` as (mtime ns, size), None where it is absent."""
    stamp: list[tuple[int, int] | None] = []
    for name in RUN_FILES:
        try:
            stat = (root / run_id / name).stat()
        except OSError:
            stamp.append(None)
        else:
            stamp.append((stat.st_mtime_ns, stat.st_size))
    return tuple(stamp)


class RunsScreen(FindScreen):
    TITLE = "Runs"
    DEFAULT_CSS = """
    RunsScreen #runs { height: auto; max-height: 40%; min-height: 3; }
    RunsScreen #detail { height: 1fr; border-top: solid $primary-darken-2; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "compare", "Compare"),
        Binding("ctrl+r", "reload", "Reload"),
        *FIND_BINDINGS,
    ]
    SORT_COLUMNS = ("RUN", "KIND", "STATUS", "CELLS")

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.rows: list[RunRow] = []
        self.marked: str | None = None
        self.shown: str | None = None
        self.summary: RunSummary | None = None
        self._listed_at = 0.0
        self.comparing = False
        self._detail_stamp: FileStamp | None = None
        self._shown_ids: list[str] = []

    def compose_body(self) -> ComposeResult:
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield FilterBar(target="runs", placeholder="filter runs (id, name, kind, status...)")
        with VerticalScroll(id="detail"):
            yield Static(Text("no run selected", style="dim"), id="detail-text")
            histograms = Static(id="detail-accept")
            histograms.display = False
            yield histograms

    def on_mount(self) -> None:
        fill_table(self.query_one("#runs", DataTable), COLUMNS, [])

    def refresh_data(self) -> None:
        if not self.is_mounted:
            return
        if time.monotonic() - self._listed_at >= LIST_EVERY_S:
            self._listed_at = time.monotonic()
            self._load_list(self.selected_id())

    def action_reload(self) -> None:
        self._listed_at = 0.0
        self.shown = None
        self.refresh_data()

    def _stamp(self, run_id: str | None) -> FileStamp | None:
        """The run's files' stamp live; None in a replay (its runs are as recorded)."""
        if run_id is None or self.backend.replay is not None:
            return None
        return run_files_stamp(self.backend.runs_root, run_id)

    @work(thread=True, exclusive=True, group="runs-list")
    def _load_list(self, selected: str | None) -> None:
        rows = list(reversed(self.backend.runs()))
        self.app.call_from_thread(self._show_list, rows, selected, self._stamp(selected))

    def _fill(self) -> None:
        """The list under the filter and sort; run ids too long for the room left are cut
        in the middle, each still told apart (time first, name last)."""
        table = self.query_one("#runs", DataTable)
        selected = self.selected_id()
        rows = self.rows
        statuses = [r.status if r.error is None else f"unreadable: {r.error}" for r in rows]
        others = max([len("STATUS"), *(len(s) for s in statuses)])
        others += len("campaign") + len("CELLS") + 2 * table.cell_padding * len(COLUMNS)
        room = max(16, (table.size.width or self.size.width) - others - 4)
        labels = distinct_names([(r.run_id, r.run_id) for r in rows], room)
        listed: list[FindRow] = []
        for row, status, label in zip(rows, statuses, labels, strict=True):
            mark = "* " if row.run_id == self.marked else ""
            cells = {
                "RUN": mark + label,
                "KIND": row.kind or "-",
                "STATUS": status,
                "CELLS": f"{row.cells_done}/{row.cells}",
            }
            order = {"RUN": (1, 0.0, row.run_id), "CELLS": (0, float(row.cells_done), "")}
            # The label may be cut in the middle: the filter reads the full id and name.
            search = f"{row.run_id} {row.name or ''}"
            listed.append(FindRow(row.run_id, cells, order, search))
        self._shown_ids = self.fill_found(table, COLUMNS, listed, selected, "runs")

    def apply_find(self) -> None:
        self._fill()
        if not self.comparing and self.selected_id() != self.shown:
            self._load_detail(self.selected_id())

    def on_resize(self) -> None:
        if self.rows:
            self._fill()
        self.call_after_refresh(self._refit_detail)

    def _refit_detail(self) -> None:
        """The shown summary laid out again at the pane's new width."""
        summary = self.summary
        if summary is not None and self.shown == summary.run_id and not self.comparing:
            self._show_summary(summary.run_id, summary, self._detail_stamp)

    def _show_list(
        self, rows: list[RunRow], stamped: str | None = None, stamp: FileStamp | None = None
    ) -> None:
        before = {row.run_id: row for row in self.rows}
        if rows != self.rows:
            self.rows = rows
            self._fill()
        if not rows:
            empty = (
                "no runs in this recording"
                if self.backend.replay is not None
                else f"no runs in {self.backend.runs_root} yet: b for Bench, then D for the "
                "demo campaign or g to benchmark a ready server"
            )
            self._show_detail(Text(empty, style="dim"))
            return
        current = self.selected_id()
        if self.comparing:
            return
        picked = next((r for r in rows if r.run_id == current), None)
        running = picked is not None and picked.status == "running"
        changed = picked is not None and before.get(picked.run_id) != picked
        touched = stamp is not None and stamped == current and stamp != self._detail_stamp
        if current != self.shown or running or changed or touched:
            self._load_detail(current)

    def selected_id(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if table.row_count == 0 or not 0 <= table.cursor_row < table.row_count:
            return None
        key = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value
        return str(key) if key is not None else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        run_id = self.selected_id()
        if self.comparing and self.shown and self.shown.endswith(f"|{run_id}"):
            return
        self.comparing = False
        if run_id != self.shown:
            self._load_detail(run_id)

    @work(thread=True, exclusive=True, group="runs-detail")
    def _load_detail(self, run_id: str | None) -> None:
        if run_id is None:
            return
        # Stamped before reading: a change made while it reads is seen on the next check.
        stamp = self._stamp(run_id)
        try:
            summary = self.backend.run_summary(run_id)
        except ConsoleError as exc:  # one damaged run: said in its detail, the screen goes on
            self.app.call_from_thread(self._show_text, exc.message)
            return
        if summary is None:
            self.app.call_from_thread(self._show_text, self._no_summary(run_id))
            return
        self.app.call_from_thread(self._show_summary, run_id, summary, stamp)

    def _no_summary(self, run_id: str) -> str:
        row = next((r for r in self.rows if r.run_id == run_id), None)
        if row is not None and row.error is not None:
            return f"{run_id}: unreadable: {row.error}"
        if self.backend.replay is not None:
            return f"{run_id}: the recording kept no summary of this run"
        return f"{run_id}: gone (its folder or run.json is no longer there)"

    def _show_text(self, text: str) -> None:
        self._show_detail(Text(text, style="red"))

    def _show_detail(self, shown: RenderableType, accept: RenderableType | None = None) -> None:
        """The detail pane's text and, under it, a run's acceptance histograms (if any)."""
        self.query_one("#detail-text", Static).update(shown)
        histograms = self.query_one("#detail-accept", Static)
        histograms.display = accept is not None
        histograms.update("" if accept is None else accept)

    def _show_summary(
        self, run_id: str, summary: RunSummary, stamp: FileStamp | None = None
    ) -> None:
        self.shown = run_id
        self.summary = summary
        self._detail_stamp = stamp
        width = (self.query_one("#detail").size.width or self.size.width) - 2
        self._show_detail(summary_view(summary, width), acceptance_view(summary, width))

    def action_compare(self) -> None:
        current = self.selected_id()
        if current is None:
            return
        if self.marked is None or self.marked == current:
            self.marked = current
            self.rows = []
            self._listed_at = 0.0
            self.refresh_data()
            self.notify(f"marked {current}; select another run and press c to compare")
            return
        self.comparing = True
        self._compare(self.marked, current)

    def escape_fallback(self) -> None:
        """Escape with no filter set: leave the comparison."""
        self.action_clear_compare()

    def action_clear_compare(self) -> None:
        self.marked = None
        self.comparing = False
        self.shown = None
        self.rows = []
        self._listed_at = 0.0
        self.refresh_data()

    @work(thread=True, exclusive=True, group="runs-detail")
    def _compare(self, first: str, second: str) -> None:
        try:
            a = self.backend.run_summary(first)
            b = self.backend.run_summary(second)
        except ConsoleError as exc:
            self.app.call_from_thread(self._show_text, f"cannot compare: {exc.message}")
            return
        if a is None or b is None:
            missing = first if a is None else second
            self.app.call_from_thread(self._show_text, f"cannot compare: {missing}: no summary")
            return
        result = compare_runs(a, b)
        self.app.call_from_thread(self._show_compare, result, a, b)

    def _show_compare(self, result: CompareResult, a: RunSummary, b: RunSummary) -> None:
        self.shown = f"{a.run_id}|{b.run_id}"
        width = self.query_one("#detail").size.width or self.size.width
        self._show_detail(compare_view(result, a, b, width - 2))
