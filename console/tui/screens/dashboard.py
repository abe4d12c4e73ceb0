"""The dashboard: servers, live charts on one time axis, GPUs by NUMA node, sources.

With a fleet, the host it shows is picked with `H` (console.tui.host_choice): a remote host
is drawn from its own store, fed from its readings, through the same code as this one.
"""

from __future__ import annotations

import time
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, VerticalScroll

from console.bench.listing import Progress
from console.core.units import pcie_link_bytes_s
from console.telemetry.keys import SourceId
from console.telemetry.quantile import format_quantile
from console.telemetry.samples import ServerSample
from console.telemetry.store import TimeSeriesStore
from console.topology.model import Topology
from console.tui.backend import Backend
from console.tui.fold import fold_after_s, folded_note, split_folded, wall_clock
from console.tui.from_thread import call_live
from console.tui.host_choice import (
    RemoteHost,
    host_choice_of,
    show_host_title,
    stale_now_line,
    with_store_note,
)
from console.tui.screens.find import FIND_BINDINGS, FindScreen
from console.tui.views import LIVE_STATES, ServerView
from console.tui.widgets.chart import Line, TimeChart
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.gpu_table import SORT_COLUMNS, GpuTable, gpu_indices
from console.tui.widgets.now_line import now_line
from console.tui.widgets.pane import Pane
from console.tui.widgets.rank_rows import RankRows
from console.tui.widgets.server_strip import ServerStrip
from console.tui.widgets.sources_bar import SourcesBar

WINDOWS_S = (60, 120, 300, 600, 1800)
LATENCY_CHARTS = ("ttft", "itl")
"""Charts of histogram percentiles: a point whose bucket is too wide is left out, its bucket
shown in the title (finer buckets: SGLang's --bucket-time-to-first-token and
--bucket-inter-token-latency, sglang 0.5.23 srt/arg_groups/fields/observability.py:104-115)."""
RUNS_EVERY_S = 2.0
"""How often the running benchmarks' progress (their client-side latency) is read."""
CHARTS_PER_TICK = 2
CHARTS = (
    ("tok", "output", "tok/s"),
    ("accept", "acceptance length", "tok/step"),
    ("queue", "requests", ""),
    ("ttft", "TTFT", "ms"),
    ("itl", "ITL", "ms"),
    ("gpu", "GPU load", "%"),
)


class DashboardScreen(FindScreen):
    TITLE = "Dashboard"
    DEFAULT_CSS = """
    DashboardScreen #charts { grid-size: 3 2; grid-gutter: 0 1; height: 2fr; min-height: 16; }
    DashboardScreen #charts.narrow { grid-size: 2 3; min-height: 24; }
    DashboardScreen #body { height: 1fr; }
    DashboardScreen ServerStrip { margin: 0 1; }
    DashboardScreen #now { margin: 0 1; }
    DashboardScreen RankRows { margin: 0 1; }
    DashboardScreen GpuTable { margin: 0 1; }
    DashboardScreen FilterBar { margin: 0 1; }
    DashboardScreen SourcesBar { margin: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "focus_next_server", "Next server"),
        Binding("plus,equals_sign", "zoom(-1)", "Zoom in", key_display="+"),
        Binding("minus", "zoom(1)", "Zoom out", key_display="-"),
        *FIND_BINDINGS,
        Binding("a", "toggle_ended", "Show stopped", show=False),
    ]
    SORT_COLUMNS = SORT_COLUMNS

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.focused_server: str | None = None
        self.window_s: float = 300
        self._charts_at: float | None = None
        self._charts_key: tuple[object, ...] = ()
        self._pending: list[str] = []
        self._bench_progress: dict[str, Progress] = {}
        self._user_focused = False
        self._runs_listed_at = 0.0
        self.show_ended = False
        """Show the stopped servers the fold age hides (`a`)."""
        self.fold_after_s, _ = fold_after_s()
        self._clock = wall_clock(backend)
        self.remote: RemoteHost | None = None
        """The remote host shown (picked with `H`); None: this host, from the backend."""

    @property
    def store(self) -> TimeSeriesStore:
        """The shown host's store."""
        return self.remote.store if self.remote is not None else self.backend.store

    @property
    def topology(self) -> Topology:
        """The shown host's topology (a remote one's GPUs as its latest reading gives them)."""
        return self.remote.gpu_topology if self.remote is not None else self.backend.topology

    def _follow_host(self) -> None:
        """Pick up the host chosen with `H` and name it in the title (only with a fleet)."""
        choice = host_choice_of(self.app)
        self.remote = choice.remote() if choice is not None else None
        show_host_title(self, self.TITLE, choice.label() if choice is not None else None)

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="body"):
            yield ServerStrip(id="strip")
            yield Pane(id="now")
            yield RankRows(id="ranks")
            with Grid(id="charts"):
                for chart_id, title, unit in CHARTS:
                    yield TimeChart(title, unit, id=f"chart-{chart_id}")
            yield FilterBar(placeholder="filter GPUs (index, server, name...)")
            yield GpuTable(id="gpus")
            yield SourcesBar(id="sources")

    def action_find(self) -> None:
        """The filter narrows the GPU table: open it with the table in view."""
        super().action_find()
        self.query_one(GpuTable).scroll_visible(animate=False)

    def on_resize(self) -> None:
        self.query_one("#charts").set_class(self.size.width < 120, "narrow")
        self.refresh_data()

    def _focus(self, servers: list[ServerView]) -> ServerView | None:
        ids = [s.id for s in servers]
        focused = next((s for s in servers if s.id == self.focused_server), None)
        ready = [s for s in servers if s.state == "ready"]
        # A server focused by default gives way to a ready one when it stops (a campaign's
        # next cell, a replay moving on); one the user picked with `f` keeps the focus.
        moved_on = focused is not None and focused.state not in LIVE_STATES and bool(ready)
        if self.focused_server not in ids or (moved_on and not self._user_focused):
            live = ready or servers
            self.focused_server = live[0].id if live else None
            self._user_focused = False
        return next((s for s in servers if s.id == self.focused_server), None)

    def listed_servers(self) -> tuple[list[ServerView], int]:
        """The servers the strip lists (and `f` cycles), and how many the fold hides. A
        gang is its head (the other nodes serve no API)."""
        shown = self.remote.servers() if self.remote is not None else self.backend.servers()
        servers = [s for s in shown if not s.is_node]
        if self.show_ended:
            return servers, 0
        now = self._clock() if self._clock is not None else None
        shown, folded = split_folded(servers, now, self.fold_after_s)
        return shown, len(folded)

    def action_toggle_ended(self) -> None:
        self.show_ended = not self.show_ended
        self.refresh_data()

    def action_focus_next_server(self) -> None:
        servers, _ = self.listed_servers()
        if not servers:
            self.notify("no servers yet", severity="warning")
            return
        ids = [s.id for s in servers]
        current = ids.index(self.focused_server) if self.focused_server in ids else -1
        self.focused_server = ids[(current + 1) % len(ids)]
        self._user_focused = True
        self.refresh_data()

    def action_zoom(self, direction: int) -> None:
        index = WINDOWS_S.index(int(self.window_s)) if self.window_s in WINDOWS_S else 2
        index = max(0, min(len(WINDOWS_S) - 1, index + direction))
        self.window_s = WINDOWS_S[index]
        if self.backend.replay is not None:
            self.backend.replay.keep_history(self.window_s)
        self.notify(f"chart window {self.window_s:.0f} s", timeout=1.5)
        self.refresh_data()

    def refresh_data(self) -> None:
        if not self.is_mounted:
            return
        self._follow_host()
        backend = self.backend
        store = self.store
        servers, folded = self.listed_servers()
        server = self._focus(servers)
        note = folded_note(folded, self.fold_after_s, shown=False) if folded else None
        remote = self.remote
        stale = remote is not None and remote.stale_reason is not None
        strip = remote.strip_servers(servers) if remote is not None else servers
        self.query_one(ServerStrip).show(
            strip, self.focused_server, note, host=remote.name if remote is not None else None
        )
        now_pane = self.query_one("#now", Pane)
        client = None
        if server is not None and remote is None:
            client = self._bench_progress.get(server.id) or self._bench_progress.get(
                server.url or ""
            )
        if remote is not None and stale:
            # A stale host's last figures may be minutes old: never shown as `now`.
            now_pane.put(stale_now_line(store, server, remote, backend.now()))
        else:
            width = now_pane.size.width or self.size.width
            now_pane.put(now_line(store, server, width, backend.now(), client))
        sample = store.server(server.id) if server is not None else None
        live = server is not None and server.state in LIVE_STATES and not stale
        self.query_one(RankRows).show(sample if live and isinstance(sample, ServerSample) else None)
        # A remote host's benchmarks are in its own results folder, not read from here.
        if self.remote is None and time.monotonic() - self._runs_listed_at >= RUNS_EVERY_S:
            self._runs_listed_at = time.monotonic()
            self._load_bench_progress()
        shown, total = self.query_one(GpuTable).show(store, self.topology, servers, self.finder)
        self.show_count(shown, total, "GPUs")
        feed = (
            remote.feed_note(backend.now())
            if remote
            else with_store_note(backend.feed_note(), store)
        )
        self.query_one(SourcesBar).show(store, feed)
        self._charts(backend.now(), server)

    @work(thread=True, exclusive=True, group="dashboard-runs")
    def _load_bench_progress(self) -> None:
        """The running benchmarks' progress by the server they load (disk: off the loop)."""
        found = {
            row.progress.server: row.progress
            for row in self.backend.runs()
            if row.status == "running" and row.progress is not None and row.progress.server
        }
        call_live(self, self._set_bench_progress, found)

    def _set_bench_progress(self, found: dict[str, Progress]) -> None:
        if found != self._bench_progress:
            self._bench_progress = found
            self.refresh_data()

    def _charts(self, now: float, server: ServerView | None) -> None:
        """Charts move when a column's worth of time has passed (a 300 s window on a
        40-column chart advances one column every ~8 s): redrawing sooner costs CPU and
        shows nothing new (the line above the charts carries the latest values every
        tick). A round of redraws shares one `now`, so every chart ends at the same
        instant, and is spread over ticks (two charts a tick) so no tick stalls keys; a
        new server, window or size redraws everything at once."""
        chart = self.query_one("#chart-tok", TimeChart)
        host = self.remote.name if self.remote is not None else None
        key = (host, server.id if server else None, self.window_s, self.size, chart.size)
        column_s = self.window_s / max(1, chart.size.width or 40)
        changed = key != self._charts_key
        if changed or self._charts_at is None or not (0 <= now - self._charts_at < column_s):
            self._charts_key = key
            self._charts_at = now
            self._pending = [chart_id for chart_id, _, _ in CHARTS]
        if not self._pending:
            return
        lines = self._lines(server)
        batch = len(self._pending) if changed else CHARTS_PER_TICK
        for chart_id in self._pending[:batch]:
            chart = self.query_one(f"#chart-{chart_id}", TimeChart)
            unplotted, note = self._unresolved(server, chart_id)
            chart.draw(
                self.store,
                lines[chart_id],
                self._charts_at,
                self.window_s,
                unplotted=unplotted,
                empty_note=note,
            )
        self._pending = self._pending[batch:]

    def _unresolved(
        self, server: ServerView | None, chart_id: str
    ) -> tuple[dict[str, str], str | None]:
        """For the latency charts: the latest percentiles whose histogram bucket is too wide
        to chart, as their interval, and why the chart is empty when none can be drawn."""
        if server is None or chart_id not in LATENCY_CHARTS:
            return {}, None
        sample = self.store.server(server.id)
        if not isinstance(sample, ServerSample):
            return {}, None
        wide = {}
        for q in ("p50", "p99"):
            found = sample.quantile(f"{chart_id}_{q}_s")
            if found is not None and not found.resolved:
                wide[q] = format_quantile(found)
        note = "histogram bucket too wide to plot" if wide else None
        return wide, note

    def _lines(self, server: ServerView | None) -> dict[str, list[Line]]:
        if server is None:
            # No server yet: the host's GPU load is still worth a chart.
            every = tuple(
                SourceId.gpu(g).series("util_pct") for g in gpu_indices(self.store, self.topology)
            )
            lines: dict[str, list[Line]] = {chart_id: [] for chart_id, _, _ in CHARTS}
            lines["gpu"] = [Line(every, "util (all GPUs)")] if every else []
            return lines
        source = SourceId.server(server.id)

        def one(name: str, label: str, scale: float = 1.0) -> Line:
            return Line((source.series(name),), label, scale)

        gpus = server.gpus or tuple(gpu_indices(self.store, self.topology))

        def every_gpu(name: str) -> tuple[str, ...]:
            return tuple(SourceId.gpu(g).series(name) for g in gpus)

        gpu_lines = [Line(every_gpu("util_pct"), "util")]
        link = self._link_capacity(gpus)
        if link:
            scale = 100 / link
            gpu_lines += [
                Line(every_gpu("pcie_rx_bytes_s"), "PCIe rx", scale),
                Line(every_gpu("pcie_tx_bytes_s"), "PCIe tx", scale),
            ]
        return {
            "tok": [one("decode_tok_s", "tok/s")],
            "accept": [one("accept_length", "accept")],
            "queue": [one("running", "running"), one("queued", "queued")],
            "ttft": [one("ttft_p50_s", "p50", 1000), one("ttft_p99_s", "p99", 1000)],
            "itl": [one("itl_p50_s", "p50", 1000), one("itl_p99_s", "p99", 1000)],
            "gpu": gpu_lines,
        }

    def _link_capacity(self, gpus: tuple[int, ...]) -> float | None:
        """The current PCIe link's one-way capacity of the first GPU (they share a design)."""
        for gpu in gpus:
            sample = self.store.gpu(gpu)
            if sample is not None:
                return pcie_link_bytes_s(sample.pcie_gen_current, sample.pcie_width_current)
        return None
