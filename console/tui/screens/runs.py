"""Runs: every run the backend serves, one run's results and plots, and runs side by side.

Runs and summaries come from the backend (the results folder live, the recording in a
replay); the summaries through their cache of record, so a finished run is read, not rebuilt.
The selected run's detail is read again when its row changes or, live, when its files do
(checked by their size and mtime on the list's timer, never every frame).

`p` turns the detail into the selected run's plots, one at a time (each press the next, then
back to the tables); moving through the list keeps the plot and shows the next run's. `c`
marks runs to compare: from the second, the marked runs are shown side by side.
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
from textual.containers import Vertical, VerticalScroll
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Static

from console.bench.compare import LABELS, CompareResult, compare_runs
from console.bench.listing import RunRow
from console.bench.noise import RunErrors, run_errors
from console.bench.plotdata import Pareto, Plot, RunPlots, run_folder_gpus, run_plots
from console.bench.results import RunSummary
from console.core.errors import ConsoleError
from console.tui.backend import Backend
from console.tui.screens.find import FIND_BINDINGS, FindScreen
from console.tui.widgets.accept_hist import acceptance_view
from console.tui.widgets.filled_table import fill_table
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.finder import FindRow
from console.tui.widgets.run_plot import PARETO_NOTE, RunPlot
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
    RunsScreen #plots { height: 1fr; border-top: solid $primary-darken-2; padding: 0 1; }
    RunsScreen #plot-head { height: auto; }
    RunsScreen.plotting #runs { max-height: 30%; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "plots", "Plots"),
        Binding("c", "compare", "Compare"),
        Binding("ctrl+r", "reload", "Reload"),
        *FIND_BINDINGS,
    ]
    SORT_COLUMNS = ("RUN", "KIND", "STATUS", "CELLS")

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.rows: list[RunRow] = []
        self.marked: list[str] = []
        """Runs marked for comparison, in the order marked (A, B, C ...)."""
        self.shown: str | None = None
        self.summary: RunSummary | None = None
        self.plots: RunPlots | None = None
        """The shown run's plots."""
        self.plot_page: int | None = None
        """Which plot the detail shows; None while it shows the tables."""
        self._compared_at: str | None = None
        """The run the cursor was on when the comparison was asked for."""
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
        plots = Vertical(id="plots")
        plots.display = False
        with plots:
            yield Static(id="plot-head")
            yield RunPlot(id="plot")

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
            # A marked run shows the letter it has in the comparison.
            marked = row.run_id in self.marked
            mark = f"{LABELS[self.marked.index(row.run_id)]} " if marked else ""
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
            self._show_summary(summary.run_id, summary, self._detail_stamp, self.plots)

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
        # The list refilled under the cursor (a mark added) is no move: the comparison stays.
        if self.comparing and run_id == self._compared_at:
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
        plots = run_plots(summary, self._run_gpus(run_id, summary))
        self.app.call_from_thread(self._show_summary, run_id, summary, stamp, plots)

    def _run_gpus(self, run_id: str, summary: RunSummary) -> dict[str, int]:
        """Each cell's GPU count from the run's run.json (in the results folder, else where
        the summary says the run was); empty when neither is on this disk."""
        found = run_folder_gpus(self.backend.runs_root / run_id)
        if not found and summary.run_dir:
            found = run_folder_gpus(Path(summary.run_dir))
        return found

    def _no_summary(self, run_id: str) -> str:
        row = next((r for r in self.rows if r.run_id == run_id), None)
        if row is not None and row.error is not None:
            return f"{run_id}: unreadable: {row.error}"
        if self.backend.replay is not None:
            return f"{run_id}: the recording kept no summary of this run"
        return f"{run_id}: gone (its folder or run.json is no longer there)"

    def _show_text(self, text: str) -> None:
        self.plots = None
        self._show_detail(Text(text, style="red"))

    def _show_detail(self, shown: RenderableType, accept: RenderableType | None = None) -> None:
        """The detail pane's text and, under it, a run's acceptance histograms (if any)."""
        self.query_one("#detail-text", Static).update(shown)
        histograms = self.query_one("#detail-accept", Static)
        histograms.display = accept is not None
        histograms.update("" if accept is None else accept)

    def _show_summary(
        self,
        run_id: str,
        summary: RunSummary,
        stamp: FileStamp | None = None,
        plots: RunPlots | None = None,
    ) -> None:
        self.shown = run_id
        self.summary = summary
        self.plots = plots
        self._detail_stamp = stamp
        width = (self.query_one("#detail").size.width or self.size.width) - 2
        self._show_detail(summary_view(summary, width), acceptance_view(summary, width))
        if self.plot_page is not None:
            self._show_plot()

    # -- plots ---------------------------------------------------------------------------

    def _panels(self) -> list[Plot | Pareto]:
        plots = self.plots
        if plots is None or self.comparing:
            return []
        panels: list[Plot | Pareto] = list(plots.plots)
        if plots.pareto is not None:
            panels.append(plots.pareto)
        return panels

    def action_plots(self) -> None:
        """The next of the shown run's plots; after the last, the tables again."""
        panels = self._panels()
        if not panels:
            self.notify("no plots: select a run with a finished level (escape leaves a comparison)")
            return
        page = 0 if self.plot_page is None else self.plot_page + 1
        if page >= len(panels):
            self._leave_plots()
            return
        self.plot_page = page
        self._show_plot()

    def _show_plot(self) -> None:
        panels = self._panels()
        if not panels or self.plot_page is None:
            self._leave_plots()
            return
        page = min(self.plot_page, len(panels) - 1)
        self.plot_page = page
        panel = panels[page]
        self.add_class("plotting")
        self.query_one("#detail").display = False
        self.query_one("#plots").display = True
        run = self.plots.run_id if self.plots else ""
        head = Text.assemble(
            (f"plot {page + 1}/{len(panels)} ", "bold"),
            f"{run}",
            ("  p next · escape tables", "dim"),
        )
        if isinstance(panel, Pareto):
            head.append(f"\n{PARETO_NOTE}", style="dim")
            if panel.left_out:
                head.append(f"; GPU count unknown: {', '.join(panel.left_out)}", style="dim")
        elif panel.note:
            head.append(f"\n{panel.note}", style="dim")
        self.query_one("#plot-head", Static).update(head)
        self.query_one("#plot", RunPlot).show(panel)

    def _leave_plots(self) -> None:
        self.plot_page = None
        self.remove_class("plotting")
        self.query_one("#plots").display = False
        self.query_one("#detail").display = True

    # -- comparison ----------------------------------------------------------------------

    def action_compare(self) -> None:
        """Mark the selected run; from the second, show every marked run side by side."""
        current = self.selected_id()
        if current is None:
            return
        if current not in self.marked:
            if len(self.marked) >= len(LABELS):
                self.notify(f"at most {len(LABELS)} runs side by side", severity="warning")
                return
            self.marked.append(current)
            self.rows = []
            self._listed_at = 0.0
            self.refresh_data()
        if len(self.marked) < 2:
            self.notify(f"marked {current}; select another run and press c to compare")
            return
        self.comparing = True
        self._compared_at = current
        self._leave_plots()
        self._compare(list(self.marked))

    def escape_fallback(self) -> None:
        """Escape with no filter set: leave the plots, else the comparison."""
        if self.plot_page is not None:
            self._leave_plots()
            return
        self.action_clear_compare()

    def action_clear_compare(self) -> None:
        self.marked = []
        self.comparing = False
        self.shown = None
        self.rows = []
        self._listed_at = 0.0
        self.refresh_data()

    @work(thread=True, exclusive=True, group="runs-detail")
    def _compare(self, run_ids: list[str]) -> None:
        summaries: list[RunSummary] = []
        for run_id in run_ids:
            try:
                summary = self.backend.run_summary(run_id)
            except ConsoleError as exc:
                self.app.call_from_thread(self._show_text, f"cannot compare: {exc.message}")
                return
            if summary is None:
                self.app.call_from_thread(self._show_text, f"cannot compare: {run_id}: no summary")
                return
            summaries.append(summary)
        errors = [self._run_errors(s) for s in summaries]
        result = compare_runs(*summaries, errors=errors)
        self.app.call_from_thread(self._show_compare, result)

    def _run_errors(self, summary: RunSummary) -> RunErrors:
        """The run's per-level standard errors from its requests on this disk, if any."""
        levels = [(cell.cell_id, level) for cell, level in summary.levels()]
        found = run_errors(self.backend.runs_root / summary.run_id, levels)
        if not found and summary.run_dir:
            found = run_errors(Path(summary.run_dir), levels)
        return found

    def _show_compare(self, result: CompareResult) -> None:
        self.shown = "|".join(run.run_id for run in result.runs)
        width = self.query_one("#detail").size.width or self.size.width
        self._show_detail(compare_view(result, width - 2))
