"""Fleet: one row per host of hosts.toml (state, GPUs busy, servers ready, tok/s, how fresh),
and the servers of every host grouped under it.

The fleet starts the first time this screen is shown (a stream per host, run as tasks on
the UI loop by console.fleet; nothing here waits on a host). A host whose link is lost
reads `stale` with the reason and keeps its last figures, dimmed. Enter on a host narrows
the servers list to it (Enter again shows every host).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Static

from console.core.units import format_duration
from console.fleet.hosts import LOCAL
from console.tui.backend import ActionRefused, Backend
from console.tui.screens.base import ConsoleScreen
from console.tui.widgets.filled_table import Cell, fill_table
from console.tui.widgets.server_strip import STATE_STYLES

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet
    from console.fleet.summary import HostSummary

COLUMNS = ("HOST", "TARGET", "STATE", "GPUS", "SERVERS", "TOK/S", "UPDATED", "REASON")
AGE_TICK_S = 1.0
"""How often the shown ages are redrawn whatever the hosts report."""
HOST_STYLES = {"up": "bold green", "connecting": "yellow", "stale": "bold yellow"}


def _count(part: int | None, whole: int | None) -> str:
    return "-" if whole is None else f"{part if part is not None else '-'}/{whole}"


def host_cells(host: HostSummary, via: str | None = None) -> list[Cell]:
    """A host's row; a stale host's figures are its last ones, dimmed. `via`: the
    Prometheus its telemetry is read through (hosts.toml `prometheus`)."""
    stale = host.state != "up"
    dim = "dim" if stale else ""
    total = sum(1 for s in host.servers if not s.external and not s.ended)
    ready = sum(1 for s in host.servers if s.state == "ready" and not s.external)
    return [
        Text(host.name, style="bold"),
        host.target if via is None else f"{host.target} via {via}",
        Text(host.state, style=HOST_STYLES.get(host.state, "")),
        Text(_count(host.gpus_busy, host.gpus_total), style=dim),
        Text(f"{ready}/{total}" if host.age_s is not None else "-", style=dim),
        Text("-" if host.tok_s is None else f"{host.tok_s:.1f}", style=dim),
        Text(_updated_text(host), style=dim),
        Text(host.reason or "", style="yellow" if host.reason else ""),
    ]


def _updated_text(host: HostSummary) -> str:
    """How old the host's latest reading is, and when a stale one is tried again (R tries
    it now)."""
    age = "never" if host.age_s is None else f"{format_duration(host.age_s)} ago"
    if host.state == "stale" and host.next_try_s is not None:
        return f"{age}, retry in {host.next_try_s:.0f}s"
    return age


def servers_by_host(hosts: list[HostSummary], wide: bool = True) -> Text:
    """Every host's servers under its name: id, state, tok/s, GPUs, and the URL where
    `wide` (it would wrap at 80 columns)."""
    text = Text()
    for host in hosts:
        if text:
            text.append("\n")
        text.append(host.name, style="bold cyan")
        text.append(f"  {host.target}  ", style="dim")
        text.append(host.state, style=HOST_STYLES.get(host.state, ""))
        if host.reason:
            text.append(f"  {host.reason}", style="yellow")
        if not host.servers:
            text.append("\n    no servers", style="dim")
        stale = host.state != "up"
        for server in host.servers:
            text.append("\n    ")
            dim = server.external or server.ended or stale
            text.append(f"{server.id:<28} ", style="dim" if dim else "")
            # A stale host's states are as last read, not now: said so, dimmed.
            state = f"last: {server.state}" if stale and not server.ended else server.state
            text.append(
                f"{state:<12}", style="dim" if stale else STATE_STYLES.get(server.state, "")
            )
            tok = "-" if server.tok_s is None or stale else f"{server.tok_s:.1f}"
            gpus = ",".join(str(g) for g in server.gpus) or "-"
            text.append(f" {tok:>8} tok/s  GPUs {gpus:<16}")
            if wide:
                text.append(f" {server.url or '-'}")
            if server.external:
                text.append("  (external)", style="dim")
            if server.ended and server.reason:
                text.append(f"  {server.reason}", style="yellow")
    return text


class FleetScreen(ConsoleScreen):
    TITLE = "Fleet"
    DEFAULT_CSS = """
    FleetScreen #hosts { height: auto; max-height: 50%; min-height: 4; }
    FleetScreen #by-host { height: 1fr; padding: 0 1; border-top: solid $primary-darken-2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_host", "Host's servers"),
        Binding("R", "retry_host", "Retry now"),
    ]

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.fleet: Fleet | None = None
        self.problem: str | None = None
        """Why there is no fleet to show (a damaged hosts file, a replay)."""
        self.only: str | None = None
        """The host the servers list is narrowed to (Enter), None for every host."""
        self._opening = False

    def compose_body(self) -> ComposeResult:
        yield DataTable(id="hosts", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="by-host"):
            yield Static("", id="by-host-text")

    def on_mount(self) -> None:
        # The ages move while no host reports (one host, stale): the app re-renders only
        # when the backend's version moves.
        self.set_interval(AGE_TICK_S, self._tick)

    def _tick(self) -> None:
        if self.is_current and self.fleet is not None:
            self.refresh_data()

    def on_screen_resume(self) -> None:
        # Only when really shown: the app's warm-up mounts every mode unseen.
        if self.fleet is None and not self._opening and self.is_current:
            self._opening = True
            self.run_worker(self._open(), group="fleet", exclusive=True)
        super().on_screen_resume()

    async def _open(self) -> None:
        try:
            self.fleet = await self.backend.open_fleet()
        except ActionRefused as exc:
            self.problem = exc.message
        self._opening = False
        self.refresh_data()

    def selected_host(self) -> str | None:
        table = self.query_one("#hosts", DataTable)
        if not 0 <= table.cursor_row < table.row_count:
            return None
        return str(table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value)

    def action_open_host(self) -> None:
        host = self.selected_host()
        self.only = None if host is None or host == self.only else host
        self.refresh_data()

    def action_retry_host(self) -> None:
        """Try the selected stale host again now instead of at the end of its backoff."""
        host = self.selected_host()
        if self.fleet is None or host is None:
            return
        if self.fleet.retry_now(host):
            self.notify(f"{host}: trying again now")
        else:
            self.notify(f"{host} is not waiting to be tried again", severity="warning")

    def on_resize(self) -> None:
        self.refresh_data()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """`enter` on the focused table arrives as a selected row, not as the binding."""
        if event.data_table.id == "hosts":
            self.action_open_host()

    def refresh_data(self) -> None:
        if not self.is_mounted:
            return
        table = self.query_one("#hosts", DataTable)
        by_host = self.query_one("#by-host-text", Static)
        if self.fleet is None:
            fill_table(table, COLUMNS, [])
            by_host.update(Text(self.problem or "starting the fleet (hosts.toml)…", style="yellow"))
            return
        keep = self.selected_host()
        hosts = self.fleet.summaries()
        via = {host.name: host.prometheus for host in self.fleet.hosts}
        fill_table(table, COLUMNS, [(h.name, host_cells(h, via.get(h.name))) for h in hosts])
        names = [h.name for h in hosts]
        if keep in names:
            table.move_cursor(row=names.index(keep))
        shown = [h for h in hosts if self.only is None or h.name == self.only]
        text = servers_by_host(shown, wide=self.size.width >= 100)
        if self.only is not None:
            text.append(f"\n\nonly {self.only}: enter shows every host", style="dim")
            if self.only == LOCAL:
                text.append("; s opens this host's Servers screen", style="dim")
        by_host.update(text)
