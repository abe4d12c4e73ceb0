"""Servers: the list, the selected server's plan, and launch / stop / restart / switch.

Every lifecycle action runs on a worker thread and reports progress lines into the activity
pane; destructive ones ask first. With a fleet (hosts.toml names other hosts), each other
host follows the local servers: its row, then the servers of its latest reading, acted on
there through `ddconsole` run over SSH in async workers (console.fleet.remote_ops).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.coordinate import Coordinate
from textual.widgets import DataTable, RichLog, Static

from console.core.redact import redact_argv, redact_env
from console.core.units import format_duration, format_index_set
from console.fleet import remote_ops
from console.fleet.remote_ops import RemoteOutcome, by_hand
from console.tui.backend import ActionRefused, Backend
from console.tui.fold import age_text, fold_after_s, folded_note, split_folded, wall_clock
from console.tui.from_thread import call_live
from console.tui.read_only import refusal
from console.tui.remote_calls import remote_calls
from console.tui.remote_rows import (
    HOST_KEY,
    RemoteHost,
    RemoteServer,
    fold_ended,
    host_detail,
    parse_key,
    remote_detail,
    remote_hosts,
    remote_rows,
)
from console.tui.screens.find import FIND_BINDINGS, FindScreen
from console.tui.screens.launch import LaunchChoice, LaunchScreen
from console.tui.screens.modals import ConfirmScreen
from console.tui.views import ServerView, gang_nodes
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.finder import FindRow, sort_value
from console.tui.widgets.server_strip import state_text, state_word

ACTIVITY_KEPT = 500
"""Activity lines kept (the pane's own limit), the remote log tail apart."""
NODE_KEY = "node:"
"""Row keys of a gang's node rows (rank 0 is the head's own id again)."""
COLUMNS = ("ID", "PROFILE", "LAYOUT", "VARIANT", "STATE", "PORT", "GPUS", "NUMA", "UP", "REASON")
# Under 110 columns: the profile is in the ID already, the state is its word alone (the
# phase is in the detail below) and last, so nothing after it is pushed off the edge.
NARROW_COLUMNS = ("ID", "LAYOUT", "VARIANT", "PORT", "UP", "STATE")


def server_detail(server: ServerView) -> Table:
    table = Table(box=None, show_header=False, padding=(0, 1), expand=True)
    table.add_column("k", style="bold", no_wrap=True, width=8)
    table.add_column("v", overflow="fold")
    table.add_row("server", f"{server.id}  {server.label}")
    if server.external:
        table.add_row(
            "external",
            Text(
                "not started by ddconsole: never signalled from here; "
                f"`ddconsole down {server.id} --external --yes` stops it",
                style="yellow",
            ),
        )
    if server.gang:
        rank = server.node_rank or 0
        table.add_row(
            "gang",
            f"node {rank} of {len(server.gang)} on {server.host} (head {server.gang[0]}); "
            "down or restart acts on every node",
        )
    table.add_row("state", state_text(server))
    if server.reason:
        table.add_row("reason", Text(server.reason, style="red"))
    # An external server found by its sglang:: processes alone may have no HTTP port.
    table.add_row("url", server.url or ("no HTTP port" if server.external else "-"))
    numa = "NUMA (schedulers, actual)" if server.external else "NUMA"
    nodes = format_index_set(list(server.numa_nodes))
    table.add_row("gpus", f"{format_index_set(list(server.gpus))}  {numa} {nodes}")
    table.add_row("pid", str(server.pid or "-"))
    if server.scheduler_pids:
        table.add_row("sched", " ".join(str(p) for p in server.scheduler_pids))
    table.add_row("log", server.log_path or "-")
    # A plan's JSON is masked where it is written (Plan.to_json); masked again here, so a
    # record written by an older ddconsole or by hand shows no secret either.
    argv = server.plan.get("argv")
    if isinstance(argv, list):
        table.add_row("argv", shlex.join(redact_argv(str(a) for a in argv)))
    env = server.plan.get("env")
    if isinstance(env, dict) and env:
        shown = redact_env({str(k): str(v) for k, v in env.items()})
        table.add_row("env", " ".join(f"{k}={v}" for k, v in sorted(shown.items())))
    for line in server.failure_excerpt[-4:]:
        table.add_row("log", Text(line, style="red"))
    return table


def node_row(node: ServerView, wide: bool) -> FindRow:
    """A gang's node, indented under its head: rank, host, pid, state, why it ended. It
    sorts and filters with its head (`fill_found` keeps it after the head's row)."""
    values: dict[str, str | Text] = {
        "ID": Text(f" └ rank {node.node_rank or 0} {node.host}", style="dim"),
        "PROFILE": "",
        "LAYOUT": f"pid {node.pid or '-'}",
        "VARIANT": "",
        "STATE": state_text(node) if wide else state_word(node),
        "PORT": str(node.port or "-") if not node.is_node else "-",
        "GPUS": format_index_set(list(node.gpus)),
        "NUMA": format_index_set(list(node.numa_nodes)),
        "UP": format_duration(node.uptime_s),
        "REASON": node.reason or "",
    }
    return FindRow(NODE_KEY + node.id, values, {}, follows=node.gang[0])


class ServersScreen(FindScreen):
    TITLE = "Servers"
    DEFAULT_CSS = """
    ServersScreen #list { height: auto; max-height: 50%; min-height: 3; }
    ServersScreen #folded { height: 1; padding: 0 1; color: $text-muted; display: none; }
    ServersScreen #folded.shown { display: block; }
    ServersScreen #lower { height: 1fr; }
    ServersScreen #detail {
        width: 3fr; padding: 0 1; border-top: solid $primary-darken-2; overflow-y: auto;
    }
    ServersScreen #activity { width: 2fr; border-top: solid $primary-darken-2; }
    ServersScreen #lower.narrow { layout: vertical; }
    ServersScreen #lower.narrow > * { width: 100%; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "launch", "New"),
        Binding("x", "stop", "Stop"),
        Binding("x", "forget", "Forget"),
        Binding("R", "restart", "Restart"),
        Binding("w", "switch", "Switch"),
        Binding("enter", "logs", "Logs", show=False),
        Binding("l", "logs(True)", "Logs", show=False),
        *FIND_BINDINGS,
        Binding("a", "toggle_ended", "Stopped"),
    ]
    SORT_COLUMNS = ("ID", "STATE", "UP", "PORT", "PROFILE", "LAYOUT", "VARIANT", "GPUS")

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.show_ended = False
        """Show the stopped servers the fold age hides (`a`)."""
        self.fold_after_s, self._settings_problem = fold_after_s()
        self._clock = wall_clock(backend)
        self._shown_ids: list[str] = []
        self._pinned: str | None = None
        """The remote server row the cursor was last put on: while it is missing from its
        host's reading (a restart there), the cursor waits on the host's row and goes back
        to it when it is listed again, never to a local row."""
        self._activity: list[str | Text] = []
        """The activity pane's lines but the remote log tail, which is kept apart so the
        next tail replaces it."""
        self._tail: list[str | Text] = []

    def compose_body(self) -> ComposeResult:
        yield DataTable(id="list", cursor_type="row", zebra_stripes=True)
        yield FilterBar(target="list", placeholder="filter servers (id, plan, state...)")
        yield Static("", id="folded")
        with Horizontal(id="lower"):
            with Vertical(id="detail"):
                yield Static("", id="detail-text")
            yield RichLog(
                id="activity",
                max_lines=ACTIVITY_KEPT + 1 + remote_ops.LOG_LINES,
                wrap=True,
                markup=False,
            )

    def on_mount(self) -> None:
        self._say(Text("activity", style="bold"))
        if self._settings_problem:
            age = age_text(self.fold_after_s)
            self._say(f"{self._settings_problem}; folding stopped servers after {age}")

    def on_resize(self) -> None:
        self.query_one("#lower").set_class(self.size.width < 110, "narrow")
        self.refresh_data()

    def selected(self) -> ServerView | None:
        table = self.query_one("#list", DataTable)
        if table.row_count == 0:
            return None
        row = table.cursor_row
        if row < 0 or row >= table.row_count:
            return None
        key = str(table.coordinate_to_cell_key(Coordinate(row, 0)).row_key.value)
        if parse_key(key) is not None:
            return None  # another host's row: never a local server, whatever its id
        server_id = key.removeprefix(NODE_KEY)
        return next((s for s in self.backend.servers() if s.id == server_id), None)

    def remote_hosts(self) -> list[RemoteHost]:
        """The fleet's other hosts with their servers; none without a fleet."""
        fleet = self.backend.fleet_now()
        if fleet is None:
            return []
        return remote_hosts(fleet.summaries(), fleet.reading)

    def selected_remote(self) -> tuple[RemoteHost, RemoteServer | None] | None:
        """(host, server) of a selected remote server row, (host, None) of a host row, None
        when a local row (or nothing) is selected."""
        key = self._selected_key() if self.is_mounted else None
        parsed = parse_key(key) if key is not None else None
        if parsed is None:
            return None
        name, server_id = parsed
        host = next((h for h in self.remote_hosts() if h.name == name), None)
        if host is None:
            return None
        return host, (host.server(server_id) if server_id is not None else None)

    def sort_columns(self) -> tuple[str, ...]:
        shown = COLUMNS if self.size.width >= 110 else NARROW_COLUMNS
        return tuple(c for c in self.SORT_COLUMNS if c in shown)

    def visible_servers(self) -> tuple[list[ServerView], list[ServerView]]:
        """(listed, folded away): the fold hides stopped servers unless `a` shows them."""
        now = self._clock() if self._clock is not None else None
        return split_folded(self.backend.servers(), now, self.fold_after_s)

    def action_toggle_ended(self) -> None:
        self.show_ended = not self.show_ended
        self.refresh_data()

    def refresh_data(self) -> None:
        if not self.is_mounted:
            return
        table = self.query_one("#list", DataTable)
        wide = self.size.width >= 110
        columns = COLUMNS if wide else NARROW_COLUMNS
        listed, folded = self.visible_servers()
        servers = listed + folded if self.show_ended else listed
        keep = self._selected_key()
        rows: list[FindRow] = []
        everyone = self.backend.servers()
        for server in servers:
            if server.is_node:
                continue  # listed under its head
            values: dict[str, str | Text] = {
                "ID": server.id,
                "PROFILE": server.profile,
                "LAYOUT": server.layout,
                "VARIANT": server.variant,
                "STATE": state_text(server) if wide else state_word(server),
                "PORT": str(server.port or "-"),
                "GPUS": format_index_set(list(server.gpus)),
                "NUMA": format_index_set(list(server.numa_nodes)),
                "UP": format_duration(server.uptime_s),
                "REASON": server.reason or "",
            }
            order = {
                "UP": sort_value(server.uptime_s),
                "STATE": sort_value(server.state),
                "GPUS": sort_value(min(server.gpus, default=None)),
            }
            rows.append(FindRow(server.id, values, order))
            for node in gang_nodes(server, everyone):
                rows.append(node_row(node, wide))
        now = self._clock() if self._clock is not None else None
        hosts, folded_there = fold_ended(
            self.remote_hosts(), now, self.fold_after_s, self.show_ended
        )
        rows.extend(remote_rows(hosts, columns))
        keep = self._keep(keep, {row.key for row in rows})
        self._shown_ids = self.fill_found(table, columns, rows, keep, "servers")
        count = len(folded) + folded_there
        note = self.query_one("#folded", Static)
        note.set_class(bool(count), "shown")
        note.update(folded_note(count, self.fold_after_s, self.show_ended) if count else "")
        self._show_detail()

    def _keep(self, selected: str | None, keys: set[str]) -> str | None:
        """The row the cursor stays on: a pinned remote server while listed, else its host's
        row (while the cursor is on one of the two), else the selected row."""
        pinned = self._pinned
        parsed = parse_key(pinned) if pinned is not None else None
        if pinned is None or parsed is None:
            return selected
        host_key = HOST_KEY + parsed[0]
        if selected not in (pinned, host_key, None):
            return selected
        return pinned if pinned in keys else host_key

    def _selected_key(self) -> str | None:
        table = self.query_one("#list", DataTable)
        if not 0 <= table.cursor_row < table.row_count:
            return None
        return str(table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value)

    def on_data_table_row_highlighted(self) -> None:
        key = self._selected_key()
        parsed = parse_key(key) if key is not None else None
        if parsed is not None and parsed[1] is not None:
            self._pinned = key
        elif key not in self._pinned_or_host():
            self._pinned = None  # the user moved elsewhere
        self._show_detail()
        self.refresh_bindings()

    def _pinned_or_host(self) -> tuple[str, ...]:
        """The pinned row's key and its host row's, while the pinned row is not listed (the
        cursor then waits on the host row); () otherwise."""
        pinned = self._pinned
        parsed = parse_key(pinned) if pinned is not None else None
        if pinned is None or parsed is None or pinned in self._shown_ids:
            return ()
        return (pinned, HOST_KEY + parsed[0])

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`x` reads Stop on a live server and Forget on an ended one (it forgets it)."""
        if action in ("stop", "forget") and self.is_mounted:
            remote = self.selected_remote()
            if remote is not None:
                ended = remote[1] is not None and not remote[1].live
                return ended if action == "forget" else not ended
            server = self.selected()
            ended = server is not None and not server.live
            return ended if action == "forget" else not ended
        return super().check_action(action, parameters)

    def action_forget(self) -> None:
        self.action_stop()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """`enter` on the focused list: the table takes the key itself and reports it as a
        selected row, so the screen's own `enter` binding never fires."""
        if event.data_table.id == "list":
            self.action_logs()

    def _show_detail(self) -> None:
        detail = self.query_one("#detail-text", Static)
        remote = self.selected_remote()
        if remote is not None:
            host, chosen = remote
            detail.update(
                host_detail(host, self.backend.demo)
                if chosen is None
                else remote_detail(chosen, host)
            )
            return
        server = self.selected()
        if server is None and self.finder.active:
            detail.update(Text(f"no server matches /{self.finder.text}/: esc clears", style="dim"))
        elif server is None and self.backend.servers():
            detail.update(Text("only stopped servers, hidden: a shows them", style="dim"))
        elif server is None:
            detail.update(Text("no servers yet: press n to launch one", style="dim"))
        else:
            detail.update(server_detail(server))

    # -- actions -------------------------------------------------------------------------

    def _say(self, line: str | Text) -> None:
        self._activity = [*self._activity[-(ACTIVITY_KEPT - 1) :], line]
        self.query_one("#activity", RichLog).write(line)

    def _show_tail(self, head: str, lines: Sequence[str]) -> None:
        """A remote log's tail at the end of the activity pane, in place of the last one."""
        log = self.query_one("#activity", RichLog)
        if self._tail:
            log.clear()
            for line in self._activity:
                log.write(line)
        self._tail = [Text(head, style="bold"), *lines]
        for line in self._tail:
            log.write(line)

    def _refused(self) -> bool:
        """A second guard behind the app's: the notice names the real reason (a live
        `--read-only` console, the setting, or a replay)."""
        if self.backend.read_only:
            self.notify(refusal(self.backend), severity="warning", timeout=6)
            return True
        return False

    def _external(self, server: ServerView) -> bool:
        """The console never signals a server it did not start: say how to stop it."""
        if server.via is not None:
            self.notify(
                f"{server.id} is read through {server.via}: the console does not act on it; "
                "run ddconsole on its host to stop or restart it",
                severity="warning",
            )
            return True
        if not server.external:
            return False
        self.notify(
            f"{server.id} is external (ddconsole did not start it); to stop it: "
            f"ddconsole down {server.id} --external --yes",
            severity="warning",
        )
        return True

    def _remote_refused(self, verb: str) -> bool:
        """Launching or switching on another host runs there, by hand: say the command."""
        remote = self.selected_remote()
        if remote is None:
            return False
        command = self._by_hand(remote[0].name, verb, "PROFILE", "--layout", "L")
        self.notify(
            f"{remote[0].name} is another host: {verb} runs there; {command}",
            severity="warning",
            timeout=8,
        )
        return True

    def _remote_unreachable(self, host: RemoteHost, verb: str, server_id: str) -> bool:
        """A host that is not up cannot be acted on now: say why and the command for later."""
        if host.up:
            return False
        why = f" ({host.reason})" if host.reason else ""
        self.notify(
            f"{host.name} is {host.state}{why}; when it is back: "
            f"{self._by_hand(host.name, verb, server_id)}",
            severity="warning",
            timeout=8,
        )
        return True

    def _not_an_id(self, host: RemoteHost, server: RemoteServer) -> bool:
        """Another host's reading may list an id that would be an option there (`--all`):
        it is never sent; say so."""
        if remote_ops.valid_server_id(server.id):
            return False
        self.notify(
            f"{host.name} lists a server whose id {server.id[:80]!r} is not a server id: "
            "nothing is run there",
            severity="warning",
            timeout=8,
        )
        return True

    def _remote_target(self, verb: str) -> tuple[RemoteHost, RemoteServer] | None:
        """The selected remote server an action may run on (None, with a notice, for a host
        row, an external server or a host that is not up)."""
        remote = self.selected_remote()
        if remote is None:
            return None
        host, server = remote
        if server is None:
            self.notify(f"select one of {host.name}'s servers", severity="warning")
            return None
        if self._not_an_id(host, server):
            return None
        running = remote_calls(self.app).verb(host.name, server.id)
        if running is not None:
            self.notify(
                f"{running} {server.id} on {host.name} is still running: its answer comes "
                "in the activity pane",
                severity="warning",
            )
            return None
        if server.external:
            self.notify(
                f"{server.id} on {host.name} is external (ddconsole did not start it); "
                f"to stop it: {self._by_hand(host.name, 'down', server.id, '--external', '--yes')}",
                severity="warning",
            )
            return None
        if self._remote_unreachable(host, verb, server.id):
            return None
        return host, server

    def action_launch(self) -> None:
        # A launch does not depend on the selected row: on another host's row it launches
        # here too, and the notice says how to launch there.
        if self._refused():
            return
        remote = self.selected_remote()
        if remote is not None:
            there = self._by_hand(remote[0].name, "up", "PROFILE", "--layout", "L")
            self.notify(f"launching on this host; on {remote[0].name}: {there}", timeout=8)

        def chosen(choice: LaunchChoice | None) -> None:
            if choice is not None:
                self._launch(choice)

        self.app.push_screen(LaunchScreen(self.backend), chosen)

    def action_switch(self) -> None:
        if self._refused() or self._remote_refused("switch"):
            return
        server = self.selected()
        if server is None:
            self.notify("select the server to switch from", severity="warning")
            return
        if self._external(server):
            return

        def chosen(choice: LaunchChoice | None) -> None:
            if choice is None:
                return
            plan = choice.plan
            others = [
                s.id
                for s in self.backend.servers()
                if s.live and s.id != server.id and set(s.gpus) & set(plan.gpus)
            ]
            stops = ", ".join([server.id, *others])

            def confirmed(yes: bool | None) -> None:
                if yes:
                    self._switch(server.id, choice)

            self.app.push_screen(
                ConfirmScreen(
                    "Switch servers?",
                    f"Stop {stops}, then launch {plan.profile} {plan.layout} {plan.variant} "
                    f"on GPUs {format_index_set(list(plan.gpus))}, port {plan.port}.",
                ),
                confirmed,
            )

        self.app.push_screen(
            LaunchScreen(self.backend, title=f"Switch {server.id} to…", replacing=server.id), chosen
        )

    def action_stop(self) -> None:
        if self._refused():
            return
        if self.selected_remote() is not None:
            self._confirm_remote_stop()
            return
        server = self.selected()
        if server is None:
            return
        if self._external(server):
            return
        verb = "Stop" if server.live else "Forget"

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._stop(server.id)

        detail = (
            f"SIGTERM to {server.id} ({server.label}, pid {server.pid}, GPUs "
            f"{format_index_set(list(server.gpus))}), then SIGKILL to its process group after "
            "the grace period."
            if server.live
            else f"Remove {server.id} ({server.state}) from the list; its log stays on disk."
        )
        self.app.push_screen(ConfirmScreen(f"{verb} {server.id}?", detail), confirmed)

    def _confirm_remote_stop(self) -> None:
        target = self._remote_target("down")
        if target is None:
            return
        host, server = target
        verb = "Stop" if server.live else "Forget"

        def confirmed(yes: bool | None) -> None:
            if yes:
                remote_calls(self.app).start(
                    host.name, server.id, "stop" if server.live else "forget"
                )
                self._remote_stop(host.name, server.id)

        gpus = format_index_set(list(server.gpus)) or "-"
        detail = (
            f"On host {host.name}: SIGTERM to {server.id} (GPUs {gpus}), then SIGKILL to its "
            f"process group after {remote_ops.GRACE_S:g} s (as "
            f"`{self._by_hand(host.name, 'down', server.id)}` does from here)."
            if server.live
            else (
                f"{server.id} on {host.name} has ended ({server.state}"
                f"{': ' + server.reason if server.reason else ''}). Forget it there: "
                f"`{self._by_hand(host.name, 'down', server.id)}` removes it from {host.name}'s "
                "list; its log stays there."
            )
        )
        self.app.push_screen(
            ConfirmScreen(f"{verb} {server.id} on {host.name}?", detail), confirmed
        )

    def _confirm_remote_restart(self) -> None:
        target = self._remote_target("restart")
        if target is None:
            return
        host, server = target

        def confirmed(yes: bool | None) -> None:
            if yes:
                remote_calls(self.app).start(host.name, server.id, "restart")
                self._remote_restart(host.name, server.id)

        self.app.push_screen(
            ConfirmScreen(
                f"Restart {server.id} on {host.name}?",
                f"On host {host.name}: stop {server.id} and launch the same plan again (as "
                f"`{self._by_hand(host.name, 'restart', server.id)}` does from here).",
            ),
            confirmed,
        )

    def action_restart(self) -> None:
        if self._refused():
            return
        if self.selected_remote() is not None:
            self._confirm_remote_restart()
            return
        server = self.selected()
        if server is None or self._external(server):
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._restart(server.id)

        self.app.push_screen(
            ConfirmScreen(
                f"Restart {server.id}?",
                f"Stop {server.id} and launch the same plan ({server.label}) again.",
            ),
            confirmed,
        )

    def action_logs(self, screen: bool = False) -> None:
        """`enter`: the selected server's log (another host's: its tail, read there); `l`
        (`screen`): the Logs screen."""
        if screen:
            self._logs_screen()
            return
        remote = self.selected_remote()
        if remote is not None:
            host, chosen = remote
            if chosen is None:
                self.notify(f"select one of {host.name}'s servers", severity="warning")
            elif self._not_an_id(host, chosen):
                pass
            elif chosen.external:
                self.notify(f"{chosen.id} on {host.name} is external: no log", severity="warning")
            elif not self._remote_unreachable(host, "logs", chosen.id):
                self._remote_logs(host.name, chosen.id)
            return
        server = self.selected()
        if server is not None and (server.external or server.via is not None):
            kind = "external" if server.external else f"read through {server.via}"
            self.notify(f"{server.id} is {kind}: ddconsole has no log of it", severity="warning")
        elif server is not None:
            self.post_message(self.ShowLogs(server.id))

    def _logs_screen(self) -> None:
        """`l`: the Logs screen. On another host's server it says where that log is (there)
        and never shows a local server, whatever its id; else as from any screen."""
        remote = self.selected_remote()
        chosen = remote[1] if remote is not None else None
        app = self.app

        async def go() -> None:
            await app.switch_mode("logs")
            show = getattr(app.screen, "show_remote", None)
            if show is not None and remote is not None and chosen is not None:
                show(remote[0].name, chosen.id)

        if remote is not None and chosen is not None:
            app.run_worker(go(), group="navigate")
        else:
            app.run_worker(app.run_action("mode('logs')"), group="navigate")

    # -- workers -------------------------------------------------------------------------

    def _progress(self, line: str) -> None:
        call_live(self, self._say, line)

    def _report(self, title: str, action: object) -> None:
        try:
            result = action() if callable(action) else None
        except ActionRefused as exc:
            call_live(self, self._say, f"{title}: {exc.message}")
            call_live(self, self.notify, exc.message, severity="error")
            return
        except Exception as exc:  # the worker must report, not die silently
            call_live(self, self._say, f"{title}: {type(exc).__name__}: {exc}")
            call_live(self, self.notify, str(exc), severity="error")
            return
        if isinstance(result, ServerView):
            severity = "information" if result.state == "ready" else "error"
            text = f"{result.id} {result.state}" + (f": {result.reason}" if result.reason else "")
            call_live(self, self.notify, text, severity=severity)
        elif isinstance(result, str):
            call_live(self, self.notify, result)

    @work(thread=True, group="lifecycle")
    def _launch(self, choice: LaunchChoice) -> None:
        plan = choice.plan
        self._progress(f"launch {plan.profile} {plan.layout} {plan.variant}")
        self._report("launch", lambda: self.backend.launch(plan, self._progress))

    @work(thread=True, group="lifecycle")
    def _switch(self, server_id: str, choice: LaunchChoice) -> None:
        self._progress(f"switch {server_id} -> {choice.plan.profile} {choice.plan.layout}")
        self._report("switch", lambda: self.backend.switch(server_id, choice.plan, self._progress))

    @work(thread=True, group="lifecycle")
    def _stop(self, server_id: str) -> None:
        self._progress(f"stop {server_id}")
        self._report("stop", lambda: self.backend.stop_server(server_id, self._progress))

    @work(thread=True, group="lifecycle")
    def _restart(self, server_id: str) -> None:
        self._progress(f"restart {server_id}")
        self._report("restart", lambda: self.backend.restart(server_id, self._progress))

    # -- another host's server: ddconsole run there, in async workers on this loop --------

    def _tell(self, title: str, outcome: RemoteOutcome, notify_ok: bool = True) -> None:
        """A remote call's outcome into the activity pane, and as a notice (a failure's
        always, naming the command to run by hand)."""
        self._say(outcome.summary if outcome.summary else title)
        for line in outcome.lines:
            self._say(f"  {line}")
        if outcome.hint:
            self._say(f"  by hand: {outcome.hint}")
        if outcome.ok:
            if notify_ok:
                self.notify(outcome.summary)
        else:
            hint = f"; {outcome.hint}" if outcome.hint else ""
            self.notify(outcome.summary + hint, severity="error", timeout=10)

    def _by_hand(self, host: str, *args: str) -> str:
        """The command that does it from a shell here (`--demo` when this console is one)."""
        return by_hand(host, *args, demo=self.backend.demo)

    def _runner(self, title: str) -> remote_ops.Runner | None:
        fleet = self.backend.fleet_now()
        if fleet is None:  # the fleet ended between the key and the worker
            self._say(f"{title}: the fleet is not running")
        return fleet

    @work(group="remote", exit_on_error=False)
    async def _remote_stop(self, host: str, server_id: str) -> None:
        title = f"stop {server_id} on {host}"
        self._say(f"{title}: {self._by_hand(host, 'down', server_id)}")
        try:
            runner = self._runner(title)
            if runner is not None:
                self._tell(title, await remote_ops.stop(runner, host, server_id))
        finally:
            remote_calls(self.app).end(host, server_id)

    @work(group="remote", exit_on_error=False)
    async def _remote_restart(self, host: str, server_id: str) -> None:
        title = f"restart {server_id} on {host}"
        wait = format_duration(remote_ops.READY_TIMEOUT_S)
        self._say(
            f"{title}: {self._by_hand(host, 'restart', server_id)} (waits up to {wait} there)"
        )
        try:
            runner = self._runner(title)
            if runner is not None:
                self._tell(title, await remote_ops.restart(runner, host, server_id))
        finally:
            remote_calls(self.app).end(host, server_id)

    @work(group="remote", exit_on_error=False)
    async def _remote_logs(self, host: str, server_id: str) -> None:
        title = f"log of {server_id} on {host}"
        runner = self._runner(title)
        if runner is None:
            return
        outcome = await remote_ops.log_tail(runner, host, server_id, remote_ops.LOG_LINES_READ)
        if not outcome.ok:
            self._tell(title, outcome)
            return
        lines, polls = remote_ops.without_polling(outcome.lines)
        at = time.strftime("%H:%M:%S")
        head = f"{host} {server_id}: last {len(lines)} lines at {at}"
        if polls:
            head += f" ({polls} polling requests left out)"
        self._show_tail(head, lines)
