"""Runs: every run the backend serves, one run's results and plots, and runs side by side.

Runs and summaries come from the backend (the results folder live, the recording in a
replay); the summaries through their cache of record, so a finished run is read, not rebuilt.
The selected run's detail is read again when its row changes or, live, when its files do
(checked by their size and mtime on the list's timer, never every frame).

`p` turns the detail into the selected run's plots, one at a time (each press the next, then
back to the tables); moving through the list keeps the plot and shows the next run's. `c`
marks runs to compare: from the second, the marked runs are shown side by side.

With a fleet (hosts.toml names other hosts), the list gets a HOST column and every other
host's runs, grouped by host: each host's `runs list --json` is read over SSH in a worker,
at once when the screen is shown, on ctrl+r and every `REMOTE_EVERY_S`. A remote run's
detail is its `runs show --json` there, cached until its row's status or progress moves. A
host that cannot be read is one row saying why; nothing here waits on a host.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.console import Group, RenderableType
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
from console.tui.backend import Backend
from console.tui.from_thread import call_live
from console.tui.remote_run_list import (
    NOTE as NOTE,
)

# Named here too: the Runs screen's tests import them from it (`as`: exported).
from console.tui.remote_run_list import HostListings
from console.tui.remote_run_list import (
    host_notes as host_notes,
)
from console.tui.remote_run_list import (
    remote_key as remote_key,
)
from console.tui.remote_run_list import (
    split_key as split_key,
)
from console.tui.remote_run_list import (
    stale_line as stale_line,
)
from console.tui.remote_run_list import (
    stale_status as stale_status,
)
from console.tui.screens.find import FIND_BINDINGS, FindScreen
from console.tui.widgets.accept_hist import acceptance_view
from console.tui.widgets.filled_table import fill_table
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.finder import FindRow
from console.tui.widgets.run_plot import PARETO_NOTE, RunPlot
from console.tui.widgets.run_tables import compare_view, distinct_names, summary_view
from console.tui.worker_notice import noticed

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet

# How often the list is re-read from disk while shown (runs change only through campaigns).
LIST_EVERY_S = 2.0
# The run id starts with its creation time and ends with its name.
COLUMNS = ("RUN", "KIND", "STATUS", "CELLS")
HOST_COLUMNS = ("HOST", *COLUMNS)
"""The list's columns with a fleet: each run's host first."""
REMOTE_EVERY_S = 30.0
"""How often another host's runs are listed again while the screen is shown."""
REMOTE_TICK_S = 5.0
"""How often the screen checks whether a host's listing is due (the app refreshes a screen
only when the backend's version moves, and a fleet of stale hosts moves nothing)."""
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
        self._summary_at: tuple[str, str | None] | None = None
        """The shown summary's row key and host (None for this host's own run)."""
        self.listings = HostListings()
        """Other hosts' runs as last listed, and when each is listed again (a fleet only)."""
        self._with_hosts = False
        """The list shows the HOST column (a fleet runs)."""
        self._summaries = SummaryCache()
        self._remote_stamp: RowStamp | None = None
        """The row stamp of the remote run whose detail is shown (or being read)."""

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
        self.set_interval(REMOTE_TICK_S, self._remote_tick)

    def sort_columns(self) -> tuple[str, ...]:
        return ("HOST", *self.SORT_COLUMNS) if self._with_hosts else self.SORT_COLUMNS

    def refresh_data(self) -> None:
        if not self.is_mounted:
            return
        fleet = self._fleet()
        if (fleet is not None) != self._with_hosts:
            self._fill()  # the HOST column comes (or goes) with the fleet
        if fleet is not None and self.is_current:
            self._list_hosts(fleet)
        if time.monotonic() - self._listed_at >= LIST_EVERY_S:
            self._listed_at = time.monotonic()
            self._load_list(self.selected_id())

    def action_reload(self) -> None:
        self._listed_at = 0.0
        self.shown = None
        if self._fleet() is not None:
            self.listings.again()  # every host listed again now
            self._summaries = SummaryCache()
        self.refresh_data()

    def _stamp(self, run_id: str | None) -> FileStamp | None:
        """The run's files' stamp live; None in a replay (its runs are as recorded) and for
        another host's run."""
        if run_id is None or self.backend.replay is not None or "/" in run_id:
            return None
        return run_files_stamp(self.backend.runs_root, run_id)

    # -- other hosts' runs ---------------------------------------------------------------

    @property
    def remote(self) -> dict[str, HostRuns]:
        """Other hosts' runs as last listed, by host (a fleet only)."""
        return self.listings.remote

    def _fleet(self) -> Fleet | None:
        """The running fleet when it has a host besides this one (the Fleet screen starts
        one for `local` alone, and one host lists as it always has)."""
        fleet = self.backend.fleet_now()
        if fleet is None or all(host.name == LOCAL for host in fleet.hosts):
            return None
        return fleet

    def _remote_tick(self) -> None:
        fleet = self._fleet()
        if fleet is not None and self.is_current:
            self._list_hosts(fleet)

    def _list_hosts(self, fleet: Fleet) -> None:
        """Start a listing of each other host whose last one is `REMOTE_EVERY_S` old (or
        that has none), one at a time per host."""
        due = self.listings.due(
            (host.name for host in fleet.hosts), lambda _: REMOTE_EVERY_S, time.monotonic()
        )
        for name in due:
            self.run_worker(
                noticed(self, self._list_host(fleet, name), f"listing the runs on {name}"),
                group=f"runs-host-{name}",
                exit_on_error=False,
            )

    async def _list_host(self, fleet: Fleet, name: str) -> None:
        try:
            listed = await fetch_runs(fleet, name, self.remote.get(name))
        finally:
            self.listings.ended(name)
        if not self.is_mounted:
            return
        if not self.listings.take(name, listed):
            return
        self._fill()
        current = self.selected_id()
        if current is not None and split_key(current)[0] == name and not self.comparing:
            self._load_detail(current)

    def _open_remote(self, key: str, host: str, run_id: str) -> None:
        """Show another host's run (from the cache while its row is unchanged, else read
        there in a worker) or a note row's full text."""
        row = self.listings.row(host, run_id)
        if row is None:
            self.shown, self._remote_stamp = key, None
            note = next(
                (full for k, _, full in host_notes(self.remote.get(host), host) if k == key), None
            )
            self._show_text(note or f"{host}: {run_id}: no longer listed there", style="yellow")
            return
        stamp = row_stamp(row)
        if self.shown == key and self._remote_stamp == stamp:
            # The same run as read: drawn again, as its host may have gone stale or come back.
            self._refit_detail()
            return
        self.shown, self._remote_stamp = key, stamp
        cached = self._summaries.get(host, run_id, stamp)
        if cached is not None:
            self._show_summary(key, cached, None, run_plots(cached), host)
            return
        fleet = self._fleet()
        if fleet is None:
            self._show_text(f"{host}: {run_id}: the fleet no longer runs")
            return
        self._show_detail(Text(f"reading {run_id} on {host}…", style="dim"))
        self._read_remote(fleet, key, host, run_id, stamp)

    @work(exclusive=True, group="runs-detail")
    async def _read_remote(
        self, fleet: Fleet, key: str, host: str, run_id: str, stamp: RowStamp
    ) -> None:
        try:
            summary = await fetch_summary(fleet, host, run_id)
        except RemoteRunError as exc:
            if self.shown == key and self._still_selected(key):
                self._show_text(f"{host}: {run_id}: {exc.message}")
            return
        self._summaries.put(host, run_id, stamp, summary)
        if self.shown == key and self._still_selected(key):
            self._show_summary(key, summary, None, run_plots(summary), host)

    @work(thread=True, exclusive=True, group="runs-list")
    def _load_list(self, selected: str | None) -> None:
        rows = list(reversed(self.backend.runs()))
        call_live(self, self._show_list, rows, selected, self._stamp(selected))

    def _fill(self) -> None:
        """The list under the filter and sort; run ids too long for the room left are cut
        in the middle, each still told apart (time first, name last). With a fleet, this
        host's runs, then each other host's, each row naming its host."""
        table = self.query_one("#runs", DataTable)
        selected = self.selected_id()
        fleet = self._fleet()
        self._with_hosts = fleet is not None
        columns = HOST_COLUMNS if self._with_hosts else COLUMNS
        entries: list[tuple[str, str, RunRow | Text]] = [
            (row.run_id, LOCAL, row) for row in self.rows
        ]
        if fleet is not None:
            for other in fleet.hosts:
                if other.name != LOCAL:
                    entries += self._host_entries(other.name)
        stale = {host for host, runs in self.remote.items() if runs.error is not None}
        rows = [row for _, _, row in entries if isinstance(row, RunRow)]
        statuses = [
            stale_status(status) if host in stale else status
            for _, host, row in entries
            if isinstance(row, RunRow)
            for status in [row.status if row.error is None else f"unreadable: {row.error}"]
        ]
        others = max([len("STATUS"), *(len(s) for s in statuses)])
        others += len("campaign") + len("CELLS") + 2 * table.cell_padding * len(columns)
        if self._with_hosts:
            others += max([len("HOST"), *(len(host) for _, host, _ in entries)])
        room = max(16, (table.size.width or self.size.width) - others - 4)
        labels = iter(distinct_names([(r.run_id, r.run_id) for r in rows], room))
        status_of = iter(statuses)
        listed: list[FindRow] = []
        for key, host, row in entries:
            # A stale host's rows follow its error note: sorted or not, they stay under it.
            follows = f"{host}{NOTE}error" if host in stale else None
            if isinstance(row, Text):
                note = row.plain
                cut = note if len(note) <= room else note[: room - 1] + "…"
                cells: dict[str, str | Text] = {"HOST": host, "RUN": Text(cut, style=row.style)}
                cells |= {"KIND": "", "STATUS": "", "CELLS": ""}
                lead = follows if follows != key else None
                listed.append(FindRow(key, cells, search=note, follows=lead, counted=False))
                continue
            # A marked run shows the letter it has in the comparison.
            marked = key in self.marked
            mark = f"{LABELS[self.marked.index(key)]} " if marked else ""
            cells = {
                "RUN": mark + next(labels),
                "KIND": row.kind or "-",
                "STATUS": next(status_of),
                "CELLS": f"{row.cells_done}/{row.cells}",
            }
            if self._with_hosts:  # one host: the filter matches what it did before
                cells["HOST"] = host
            if follows is not None:  # as last read: dimmed
                cells = {column: Text(str(cell), style="dim") for column, cell in cells.items()}
            order = {"RUN": (1, 0.0, row.run_id), "CELLS": (0, float(row.cells_done), "")}
            # The label may be cut in the middle: the filter reads the full id and name.
            search = f"{row.run_id} {row.name or ''}"
            listed.append(FindRow(key, cells, order, search, follows))
        self._shown_ids = self.fill_found(table, columns, listed, selected, "runs")

    def _host_entries(self, host: str) -> list[tuple[str, str, RunRow | Text]]:
        """Another host's rows: why its listing is missing or old, its runs (newest first),
        then how many more it has."""
        listed = self.remote.get(host)
        head: list[tuple[str, str, RunRow | Text]] = []
        tail: list[tuple[str, str, RunRow | Text]] = []
        for key, text, _ in host_notes(listed, host):
            if key.endswith(("pending", "error")):
                style = "yellow" if key.endswith("error") else "dim"
                head.append((key, host, Text(text, style=style)))
            else:
                tail.append((key, host, Text(text, style="dim")))
        runs: list[tuple[str, str, RunRow | Text]] = [
            (remote_key(host, row.run_id), host, row) for row in (listed.rows if listed else ())
        ]
        return head + runs + tail

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
        summary, at = self.summary, self._summary_at
        if summary is not None and at is not None and self.shown == at[0] and not self.comparing:
            self._show_summary(at[0], summary, self._detail_stamp, self.plots, at[1])

    def _show_list(
        self, rows: list[RunRow], stamped: str | None = None, stamp: FileStamp | None = None
    ) -> None:
        before = {row.run_id: row for row in self.rows}
        if rows != self.rows:
            self.rows = rows
            self._fill()
        if not rows and not self._with_hosts:
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

    def _load_detail(self, key: str | None) -> None:
        """Show the run of row `key`: this host's read from disk in a thread, another
        host's read there."""
        if key is None:
            return
        host, run_id = split_key(key)
        if host is None:
            self._load_local_detail(key)
        else:
            self._open_remote(key, host, run_id)

    def _still_selected(self, key: str) -> bool:
        """Whether row `key` is still the selected one, with no comparison shown: a detail
        read for a row the cursor has left is dropped (`exclusive` cannot stop a thread)."""
        return not self.comparing and self.selected_id() == key

    def _show_local(self, run_id: str, shown: Callable[[], None]) -> None:
        """On the UI loop: show a local run's detail if its row is still selected."""
        if self._still_selected(run_id):
            shown()

    @work(thread=True, exclusive=True, group="runs-detail")
    def _load_local_detail(self, run_id: str) -> None:
        # Stamped before reading: a change made while it reads is seen on the next check.
        stamp = self._stamp(run_id)
        try:
            summary = self.backend.run_summary(run_id)
        except ConsoleError as exc:  # one damaged run: said in its detail, the screen goes on
            message = exc.message
            call_live(self, self._show_local, run_id, lambda: self._show_text(message))
            return
        if summary is None:
            text = self._no_summary(run_id)
            call_live(self, self._show_local, run_id, lambda: self._show_text(text))
            return
        plots = run_plots(summary, self._run_gpus(run_id, summary))
        call_live(
            self,
            self._show_local,
            run_id,
            lambda: self._show_summary(run_id, summary, stamp, plots),
        )

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

    def _show_text(self, text: str, style: str = "red") -> None:
        self.plots = None
        self._show_detail(Text(text, style=style))

    def _show_detail(self, shown: RenderableType, accept: RenderableType | None = None) -> None:
        """The detail pane's text and, under it, a run's acceptance histograms (if any)."""
        self.query_one("#detail-text", Static).update(shown)
        histograms = self.query_one("#detail-accept", Static)
        histograms.display = accept is not None
        histograms.update("" if accept is None else accept)

    def _show_summary(
        self,
        key: str,
        summary: RunSummary,
        stamp: FileStamp | None = None,
        plots: RunPlots | None = None,
        host: str | None = None,
    ) -> None:
        """The summary of row `key`; `host` names another host the run is on."""
        self.shown = key
        self.summary = summary
        self._summary_at = (key, host)
        self.plots = plots
        self._detail_stamp = stamp
        width = (self.query_one("#detail").size.width or self.size.width) - 2
        view = summary_view(summary, width)
        if host is not None:
            where = Text.assemble(
                ("on host ", "dim"),
                (host, "bold"),
                (f"  · its runs are compared there: ddconsole --host {host} runs compare", "dim"),
            )
            line = stale_line(self.remote.get(host), host, time.time())
            if line is not None:
                where.append(f"\n{line}", style="bold yellow")
            view = Group(where, view)
        self._show_detail(view, acceptance_view(summary, width))
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
        at = self._summary_at
        if at is not None and at[1] is not None and self.shown == at[0]:
            run += f" on {at[1]}"
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
        host = split_key(current)[0]
        if host is not None:
            # Comparing reads each run's requests on this disk; the other host has them.
            self.notify(
                f"runs on {host} are compared there: ddconsole --host {host} runs compare "
                "RUN1 RUN2",
                severity="warning",
            )
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
                call_live(self, self._show_text, f"cannot compare: {exc.message}")
                return
            if summary is None:
                call_live(self, self._show_text, f"cannot compare: {run_id}: no summary")
                return
            summaries.append(summary)
        errors = [self._run_errors(s) for s in summaries]
        result = compare_runs(*summaries, errors=errors)
        call_live(self, self._show_compare, result)

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
