"""The Bench screen's other hosts (a fleet only): their ready servers in the targets list,
their newest runs listed there over SSH (console.fleet.remote_runs, as the Runs screen lists
them) in async workers, a remote run's levels read there (`runs show --json`, cached until
its row moves), `g` on another host's server (`bench ... --detach` there, through
console.fleet.remote_bench) and `x` on another host's run (`runs stop` there).

`BenchHosts` is the Bench screen's base: the screen draws the lists and asks; this holds the
state of the other hosts and the calls to them. Nothing here waits on a host: a stale one is
a row saying why.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.text import Text
from textual import work
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from console.bench.estimate import CellSpeed, estimate_bench
from console.bench.listing import RunRow
from console.bench.request import BenchRequest
from console.bench.results import RunSummary
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
from console.tui.backend import Backend
from console.tui.bench_hosts import (
    Target,
    campaign_note,
    other_fleet,
    remote_bench_detail,
    remote_targets,
)
from console.tui.remote_calls import remote_calls
from console.tui.remote_rows import parse_key, remote_hosts
from console.tui.remote_run_list import (
    HostListings,
    host_notes,
    remote_key,
    split_key,
    stale_line,
)
from console.tui.run_rows_format import plain
from console.tui.screens.find import FindScreen
from console.tui.views import ServerView
from console.tui.worker_notice import noticed

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet

RECENT_RUNS = 8
"""Runs the list shows of each host, newest first."""
REMOTE_EVERY_S = 30.0
"""How often another host's runs are listed again while the screen is shown..."""
REMOTE_RUNNING_EVERY_S = 5.0
"""...and how often while one of its runs is running (or one started here is awaited)."""
REMOTE_TICK_S = 2.5
"""How often the screen checks whether a host's listing is due (the app refreshes a screen
only when the backend's version moves, and a fleet of stale hosts moves nothing)."""


class BenchHosts(FindScreen):
    """The other hosts' part of the Bench screen; the screen gives the hooks below."""

    runs: list[RunRow]
    """This host's newest runs as listed (the screen's)."""
    _follow: str | None
    """A run started here: selected once the list has it (the screen's)."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self._targets: list[str] = []
        self._target_lines: list[str] = []
        """The targets list's lines as shown (with a fleet, a host's note may change)."""
        self.listings = HostListings()
        """Other hosts' runs as last listed, and when each is listed again (a fleet only)."""
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

    @property
    def remote(self) -> dict[str, HostRuns]:
        """Other hosts' runs as last listed, by host (a fleet only)."""
        return self.listings.remote

    # -- the screen's hooks: BenchScreen's methods, declared here for the type checker only
    # (this class is BenchScreen's base and nothing else's).

    _show_runs: Callable[..., None]
    """(rows, force=False): draw the run list."""
    _selected_run: Callable[[], str | None]
    _show_levels: Callable[[Any], None]
    _levels_view: Callable[[RunSummary, RunRow | None], Group]
    _load_request: Callable[[str], BenchRequest | None]
    _speed: Callable[[tuple[str, str, str]], CellSpeed | None]
    _confirm_then: Callable[[Callable[[], tuple[str, str]], Callable[[], object]], None]

    # -- targets ---------------------------------------------------------------------------

    def _show_targets(self, fleet: Fleet, local: list[ServerView]) -> None:
        """The targets list with a fleet: this host's ready servers, then each other host's
        (or why a host offers none), each line led by its host; the highlighted one stays."""
        remote = remote_targets(remote_hosts(fleet.summaries(), fleet.reading))
        options = [
            Option(Text.assemble((LOCAL, "bold"), f"  {s.id}  {s.variant}  :{s.port}"), id=s.id)
            for s in local
        ] or [Option(Text(f"{LOCAL}  none ready: s, then n to launch", style="dim"), disabled=True)]
        options += [Option(t.label, id=t.key, disabled=t.server is None) for t in remote]
        lines = [f"{o.id} {plain(o.prompt)}" for o in options]
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

    def _with_targets_of_hosts(self) -> bool:
        """Whether the targets list is the fleet's (lines led by their host, notes between)."""
        return bool(self._target_lines)

    # -- other hosts' runs ---------------------------------------------------------------

    def _run_keys(self, rows: list[RunRow]) -> list[str]:
        """Every run's row key: this host's `rows`, then each other host's listed runs."""
        keys = [r.run_id for r in rows]
        for host, listed in self.remote.items():
            keys += [remote_key(host, r.run_id) for r in listed.rows[:RECENT_RUNS]]
        return keys

    def _start_remote_ticks(self) -> None:
        """Check every `REMOTE_TICK_S` whether a host's listing is due (on mount)."""
        self.set_interval(REMOTE_TICK_S, self._remote_tick)

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
        due = self.listings.due(
            (host.name for host in fleet.hosts), self._due_every, time.monotonic()
        )
        for name in due:
            self.run_worker(
                noticed(self, self._list_host(fleet, name), f"listing the runs on {name}"),
                group=f"bench-host-{name}",
                exit_on_error=False,
            )

    async def _list_host(self, fleet: Fleet, name: str) -> None:
        try:
            listed = await fetch_runs(fleet, name, self.remote.get(name), limit=RECENT_RUNS)
        finally:
            self.listings.ended(name)
        if not self.is_mounted:
            return
        if self.listings.take(name, listed):
            failed = self._remote_failed
            if failed is not None and split_key(failed[0])[0] == name:
                self._remote_failed = None  # read again: a failed read may now pass
            self._show_runs(self.runs, force=True)

    def _open_remote(self, key: str, host: str, run_id: str) -> None:
        """Show another host's run's levels (from the cache while its row is unchanged,
        else read there in a worker) or a note row's full text."""
        row = self.listings.row(host, run_id)
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
            row = self.listings.row(host, run_id)
            self._show_levels(self._remote_view(host, summary, row))
            if row is not None and row_stamp(row) != stamp:
                # It moved while read: read again, once this read has ended (a read started
                # from here would cancel this one, its group's).
                self.call_later(self._open_remote, key, host, run_id)

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

    # -- actions there ---------------------------------------------------------------------

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
                f"{request.output_len} out).\n{remote_bench_detail(host, args[:-1], left, demo)}",
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
        self.listings.again(host)  # listed again now, then closely while it runs
        self._show_runs(self.runs)  # selected now when a listing in flight had it already
        self._remote_tick()

    def _campaign_note(self) -> str:
        """A campaign confirmation's first line while another host's server is
        highlighted: campaigns run here only."""
        target = self._remote_target() if self._with_targets_of_hosts() else None
        return "" if target is None else campaign_note(target.host, self.backend.demo) + "\n"

    def _stop_remote(self, host: str, run_id: str) -> None:
        """Stop the run there; q asks first while it runs (quitting would end it midway)."""
        remote_calls(self.app).start(host, run_id, "runs stop")
        self._stop_remote_work(host, run_id)

    @work(group="bench-stop", exit_on_error=False)
    async def _stop_remote_work(self, host: str, run_id: str) -> None:
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
        self.listings.again(host)  # its stopped run listed again now
        self._remote_tick()
