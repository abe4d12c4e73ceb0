"""Which host the Dashboard and Topology show: this one, or a remote host of the fleet.

With a fleet running (`Backend.fleet_now()`), `H` on those screens opens a picker of the
fleet's hosts, `local` first; a remote host is drawn from its own store, fed from its
readings since the fleet started (console.fleet.host_store), with its topology and servers
as its latest reading gives them. Without a fleet nothing here shows: no key, no title, no
picker, and the screens read the backend as they always did.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from console.core.units import format_duration
from console.fleet.hosts import LOCAL
from console.telemetry.samples import ServerSample
from console.telemetry.store import TimeSeriesStore
from console.topology.model import Topology
from console.tui.backend import Backend
from console.tui.screens.fleet import HOST_STYLES
from console.tui.screens.modals import MODAL_CSS
from console.tui.views import FeedNote, ServerView
from console.tui.widgets.topbar import TopBar

if TYPE_CHECKING:
    from console.fleet.fleet import Fleet
    from console.fleet.host_store import HostStore, HostStores
    from console.fleet.summary import HostSummary

HOST_MODES = ("dashboard", "topology")
"""The modes that show the chosen host (the others show every host, or this one)."""


def host_label(summary: HostSummary) -> str:
    """`host alpha`, `host alpha (connecting)`, `host alpha (stale: reason)`."""
    if summary.state == "up":
        return f"host {summary.name}"
    if summary.reason:
        return f"host {summary.name} ({summary.state}: {summary.reason})"
    return f"host {summary.name} ({summary.state})"


class RemoteHost:
    """A remote host as Dashboard and Topology read it: its store, and the topology and
    servers of its latest reading (rebuilt only when a new reading arrived)."""

    def __init__(self, host: HostStore, summary: HostSummary) -> None:
        self.name = host.name
        self._host = host
        self.summary = summary
        self._built_from: object = None
        self._topology: Topology | None = None
        self._gpu_topology: Topology | None = None
        self._servers: list[ServerView] = []

    @property
    def store(self) -> TimeSeriesStore:
        return self._host.store

    @property
    def fed_mono(self) -> float | None:
        return self._host.fed_mono

    def _build(self) -> None:
        from console.fleet.host_store import reading_servers, reading_topology

        reading = self._host.reading
        if self._topology is not None and reading is self._built_from:
            return
        self._built_from = reading
        self._topology = reading_topology(reading)
        self._gpu_topology = dataclasses.replace(self._topology, numa_nodes=())
        self._servers = [ServerView.from_json(entry) for entry in reading_servers(reading)]

    @property
    def topology(self) -> Topology:
        self._build()
        assert self._topology is not None
        return self._topology

    @property
    def gpu_topology(self) -> Topology:
        """The topology without its NUMA nodes, for the GPU table: it groups the GPUs by
        their node all the same, and names no CPU set a reading does not give."""
        self._build()
        assert self._gpu_topology is not None
        return self._gpu_topology

    def servers(self) -> list[ServerView]:
        self._build()
        return self._servers

    @property
    def stale_reason(self) -> str | None:
        """Why the host's figures are not current (its link is lost); None while up."""
        if self.summary.state != "stale":
            return None
        return self.summary.reason or "link lost"

    def strip_servers(self, servers: list[ServerView]) -> list[ServerView]:
        """The server strip's rows: a stale host's servers read `stale`, the state last
        read kept in the reason (their state now is not known)."""
        if self.stale_reason is None:
            return servers
        return [stale_view(server, self.name) for server in servers]

    def age_s(self, now: float) -> float | None:
        fed = self._host.fed_mono
        return None if fed is None else max(0.0, now - fed)

    def feed_note(self, now: float) -> FeedNote:
        """Where the figures come from, for the sources strip: the host over SSH and how
        fresh its reading is; a stale host's reason and its figures' age."""
        summary = self.summary
        age = self.age_s(now)
        ago = "no reading yet" if age is None else f"read {format_duration(age)} ago"
        if summary.state == "stale":
            note = FeedNote(
                f"host {self.name} stale: {summary.reason or 'link lost'} ({ago}; last figures)",
                False,
            )
        elif age is None:
            note = FeedNote(f"host {self.name} over ssh ({summary.target}): {ago}", False)
        else:
            note = FeedNote(f"host {self.name} over ssh ({summary.target}), {ago}", True)
        full = store_full(self.store)
        return note if full is None else FeedNote(f"{note.text}; {full}", False)


def stale_view(server: ServerView, host: str) -> ServerView:
    """A server of a stale host as the strip shows it: `stale`, with the state last read."""
    return dataclasses.replace(
        server, state="stale", reason=f"host {host} stale; last read {server.state}"
    )


def stale_now_line(
    store: TimeSeriesStore, server: ServerView | None, remote: RemoteHost, now: float
) -> Text:
    """The Dashboard's `now` line for a stale host: `stale 15m: reason`, then the focused
    server's last figures, dim and aged, never as current ones."""
    from console.tui.widgets.now_line import last_line

    age = remote.age_s(now)
    head = Text.assemble(
        ("stale", "bold yellow"),
        (f" {format_duration(age)}" if age is not None else "", "yellow"),
        (f": {remote.stale_reason or 'link lost'}", "yellow"),
    )
    if server is None:
        return head
    sample = store.server(server.id)
    head.append("  ")
    head.append_text(last_line(server, sample if isinstance(sample, ServerSample) else None, now))
    return head


def store_full(store: TimeSeriesStore) -> str | None:
    """How many series a full store could not keep; None when it kept every one."""
    if store.dropped_series == 0:
        return None
    return f"store full: {store.dropped_series} series not kept"


def with_store_note(note: FeedNote | None, store: TimeSeriesStore) -> FeedNote | None:
    """`note` plus, when the store was full, how many series it could not keep (their
    charts would otherwise read `no data` with no reason)."""
    full = store_full(store)
    if full is None:
        return note
    if note is None:
        return FeedNote(full, False)
    return FeedNote(f"{note.text}; {full}", False)


class HostChoice:
    """The host Dashboard and Topology show, and every remote host's store. The app calls
    `follow()` each tick: a fleet's stores are made (and fed from then on) as soon as the
    backend has a fleet, whichever screen is shown."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.chosen = LOCAL
        self._fleet: Fleet | None = None
        self._stores: HostStores | None = None
        self._remotes: dict[str, RemoteHost] = {}

    def follow(self) -> bool:
        """Start feeding the stores of a fleet that appeared; True when whether a host can
        be chosen changed (the key bar's `H` comes or goes)."""
        # A snapshot's frozen backend has no fleet at all (no `fleet_now`).
        fleet_now = getattr(self.backend, "fleet_now", None)
        fleet = fleet_now() if fleet_now is not None else None
        if fleet is self._fleet:
            return False
        was = self.available()
        if self._stores is not None:
            self._stores.close()
        self._fleet, self._stores, self._remotes = fleet, None, {}
        if fleet is not None and any(not host.is_local for host in fleet.hosts):
            from console.fleet.host_store import HostStores

            self._stores = HostStores(fleet)
        if self.chosen not in self.names():
            self.chosen = LOCAL
        return was != self.available()

    def close(self) -> None:
        if self._stores is not None:
            self._stores.close()

    def available(self) -> bool:
        """A fleet with a host besides this one runs."""
        return self._stores is not None

    def names(self) -> list[str]:
        return [LOCAL, *self._stores.names()] if self._stores is not None else [LOCAL]

    def summaries(self) -> list[HostSummary]:
        """Every host of the fleet, `local` first (hosts.toml's order); [] without one."""
        if self._fleet is None or self._stores is None:
            return []
        found = self._fleet.summaries()
        return sorted(found, key=lambda s: s.name != LOCAL)

    def host_store(self, name: str) -> HostStore | None:
        """A remote host's store (None: this host, an unknown name, or no fleet)."""
        return self._stores.get(name) if self._stores is not None else None

    def choose(self, name: str) -> None:
        self.chosen = name if name in self.names() else LOCAL

    def remote(self) -> RemoteHost | None:
        """The chosen host when it is a remote one; None for this host (or no fleet)."""
        if self.chosen == LOCAL or self._stores is None or self._fleet is None:
            return None
        host = self._stores.get(self.chosen)
        if host is None:
            return None
        summary = self._fleet.summary(self.chosen)
        remote = self._remotes.get(self.chosen)
        if remote is None:
            remote = self._remotes[self.chosen] = RemoteHost(host, summary)
        remote.summary = summary
        return remote

    def label(self) -> str | None:
        """What the title adds (`host alpha (stale: reason)`); None without a fleet."""
        if self._fleet is None or self._stores is None:
            return None
        if self.chosen == LOCAL:
            return f"host {LOCAL}"  # read by this console itself, not through the fleet
        return host_label(self._fleet.summary(self.chosen))


def host_choice_of(app: App[object]) -> HostChoice | None:
    """The app's host choice (the console app has one; a test's bare app has none)."""
    choice = getattr(app, "host_choice", None)
    return choice if isinstance(choice, HostChoice) else None


def show_host_title(screen: Screen[Any], title: str, label: str | None) -> None:
    """Name the shown host in the screen's top bar (`Dashboard · host alpha`); the title
    alone without a fleet."""
    wanted = title if label is None else f"{title} · {label}"
    for bar in screen.query(TopBar):
        if bar.screen_name != wanted:
            bar.screen_name = wanted
            bar.update_bar()


def picker_lines(hosts: list[HostSummary], chosen: str) -> list[Text]:
    """One line per host: the name (marked where it is the one shown), its state and, for
    a host that is not up, why."""
    width = max((len(h.name) for h in hosts), default=5)
    lines = []
    for host in hosts:
        line = Text("● " if host.name == chosen else "  ", style="bold cyan")
        line.append(f"{host.name:<{width}}  ", style="bold")
        line.append(host.state, style=HOST_STYLES.get(host.state, ""))
        if host.reason:
            line.append(f": {host.reason}", style="yellow")
        if host.gpus_total is not None:
            line.append(f"  GPUs {host.gpus_busy or 0}/{host.gpus_total} busy", style="dim")
        lines.append(line)
    return lines


class HostPicker(ModalScreen[str | None]):
    """Pick the host Dashboard and Topology show; Enter picks, Esc keeps the current one."""

    DEFAULT_CSS = MODAL_CSS.format(name="HostPicker") + "HostPicker OptionList { height: auto; }"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, hosts: list[HostSummary], chosen: str) -> None:
        super().__init__()
        self.hosts = hosts
        self.chosen = chosen

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Show host", classes="title")
            lines = picker_lines(self.hosts, self.chosen)
            options = [Option(line, id=h.name) for h, line in zip(self.hosts, lines, strict=True)]
            yield OptionList(*options, id="hosts")
            yield Static("enter shows the host · esc keeps this one", classes="keys")

    def on_mount(self) -> None:
        names = [h.name for h in self.hosts]
        option_list = self.query_one(OptionList)
        option_list.highlighted = names.index(self.chosen) if self.chosen in names else 0
        option_list.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
