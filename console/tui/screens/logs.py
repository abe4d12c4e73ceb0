"""Logs: one server's log, followed live, searchable, errors highlighted, and the classified
failure reason on top, with the phase reached and the failure's line (the diagnosis
`ddconsole diagnose` gives). Secrets in log lines are masked before they are shown."""

from __future__ import annotations

import os
import re
from collections import deque
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.timer import Timer
from textual.widgets import Static

from console.core.errors import ConsoleError
from console.core.redact import redact_text, secret_values
from console.fleet.remote_ops import by_hand
from console.server.classify import is_error_line
from console.server.diagnose import Diagnosis, diagnose_file
from console.server.milestones import LogFollower, tail_lines
from console.tui.backend import Backend
from console.tui.from_thread import call_live
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.find import typing
from console.tui.views import ServerView
from console.tui.widgets.filter_bar import FilterBar
from console.tui.widgets.log_view import LogView

MAX_LINES = 5000
MATCH_STYLE = "black on yellow"
CURRENT_STYLE = "bold white on dark_orange3"
"""The match `n`/`N` stand on, told apart from the others (as less and vim do)."""
TYPING_PAUSE_S = 0.15
"""Typing in the search bar highlights once it pauses this long (a redraw per key would
write the whole log again each time)."""


def remote_log_note(host: str, server_id: str, demo: bool = False) -> Text:
    """What the screen shows for another host's server: where its log is and how to read it."""
    follow = by_hand(host, "logs", server_id, "-f", demo=demo)
    return Text.assemble(
        (f"{server_id}'s log is on {host}, not here. ", "yellow"),
        "enter on its row in Servers shows its last lines; to follow it: ",
        (follow, "bold"),
        ("\n[ / ] show this host's servers", "dim"),
    )


class LogsScreen(ConsoleScreen):
    TITLE = "Logs"
    DEFAULT_CSS = """
    LogsScreen #which { height: 1; padding: 0 1; background: $boost; }
    LogsScreen #reason { height: auto; max-height: 8; padding: 0 1; }
    LogsScreen #log { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left_square_bracket", "cycle(-1)", "Prev server", key_display="["),
        Binding("right_square_bracket", "cycle(1)", "Next server", key_display="]"),
        Binding("f", "follow", "Follow"),
        Binding("slash", "search", "Search", key_display="/", priority=True),
        Binding("n", "next_match(1)", "Next match"),
        Binding("N", "next_match(-1)", "Prev match"),
        Binding("enter", "next_match(1)", "Next match", show=False),
        Binding("shift+enter", "next_match(-1)", "Prev match", show=False),
        Binding("escape", "clear_search", "Clear search", show=False),
        Binding("e", "next_error", "Next error"),
        Binding("d", "failure_line", "Failure line"),
        Binding("w", "wrap", "Wrap"),
    ]

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.server_id: str | None = None
        self.remote: tuple[str, str] | None = None
        """(host, server id) of another host's server asked for: its log is there, so the
        screen says how to read it and never shows a local server of the same id."""
        self.follow = True
        self.lines: deque[str] = deque(maxlen=MAX_LINES)
        self.pattern: re.Pattern[str] | None = None
        self.match_at = -1
        self._appended = 0
        """Lines appended since the log was (re)loaded: what the match count is cached by."""
        self._matches: tuple[tuple[object, ...], list[int]] = ((), [])
        self._typing: Timer | None = None
        self._follower: LogFollower | None = None
        self._reading = False
        self._diagnosis: Diagnosis | None = None
        self._diagnosed: tuple[str, int, int] | None = None
        """(path, size, mtime) the diagnosis was made from."""

    def compose_body(self) -> ComposeResult:
        yield Static("", id="which")
        yield Static("", id="reason")
        yield LogView(MAX_LINES, id="log")
        yield FilterBar(target="log", placeholder="search the log (regex, case-insensitive)")

    def show_remote(self, host: str, server_id: str) -> None:
        """Another host's server: no local log is shown, the screen says where it is."""
        self.remote = (host, server_id)
        self._show_log_of(None)
        self.refresh_data()

    def show_server(self, server_id: str) -> None:
        self.remote = None
        if server_id != self.server_id:
            self._show_log_of(server_id)
        self.refresh_data()

    def _show_log_of(self, server_id: str | None) -> None:
        """Start over on `server_id`'s log (None: no local log): nothing of the last one
        is kept (its follower, diagnosis, lines, search position)."""
        self.server_id = server_id
        self._follower = None
        self._diagnosis = None
        self._diagnosed = None
        self.lines.clear()
        self.match_at = -1
        if self.is_mounted:
            self.query_one("#log", LogView).clear()

    def _server(self) -> ServerView | None:
        servers = self.backend.servers()
        if self.server_id is None or all(s.id != self.server_id for s in servers):
            if not servers:
                return None
            failed = [s for s in servers if s.state == "failed"]
            self.show_server((failed or servers)[-1].id)
        return next((s for s in servers if s.id == self.server_id), None)

    def refresh_data(self) -> None:
        if not self.is_mounted:
            return
        which = self.query_one("#which", Static)
        reason = self.query_one("#reason", Static)
        if self.remote is not None:
            host, server_id = self.remote
            which.update(
                Text.assemble((server_id, "bold"), "  on ", (host, "bold cyan"), "  (another host)")
            )
            reason.update(remote_log_note(host, server_id, self.backend.demo))
            return
        server = self._server()
        if server is None:
            which.update(Text("no servers: nothing to show", style="dim"))
            reason.update("")
            return
        mode = "following" if self.follow else "paused (f to follow)"
        search = f"/{self.pattern.pattern}/ {self.match_counter()}  " if self.pattern else ""
        for bar in self.query(FilterBar):
            bar.set_count(self.match_counter() if self.pattern else "")
        # What changes as you work (state, following, the search) first; at 80 columns the
        # plan and the path are what the edge cuts.
        here = ("this host  ", "dim") if self.backend.fleet_now() is not None else ""
        which.update(
            Text.assemble(
                here,
                (server.id, "bold"),
                f"  {server.state}  ",
                (f"{mode}  ", "dim"),
                (search, "cyan"),
                f"{server.label}  {server.log_path or 'no log'}",
            )
        )
        if server.state == "failed":
            reason.update(
                Text.assemble(
                    ("FAILED ", "bold white on red"),
                    (f" {server.reason or 'unknown'}", "bold red"),
                    (f"  [{server.failure_kind}]" if server.failure_kind else "", "dim"),
                    (self._diagnosis_note(), "dim"),
                )
            )
        elif server.reason:
            reason.update(Text(server.reason, style="yellow"))
        else:
            reason.update("")
        if server.log_path and not self._reading:
            self._reading = True
            self._read(server.log_path, self._secrets(server), server.state == "failed")

    def _diagnosis_note(self) -> str:
        """`reached: PHASE (TIME) - failure at line N (d)` from the diagnosis, if there is one."""
        diagnosis = self._diagnosis
        if diagnosis is None:
            return ""
        parts = []
        if diagnosis.reached is not None:
            when = diagnosis.reached.timestamp or f"line {diagnosis.reached.line_number}"
            parts.append(f"reached: {diagnosis.reached.label} ({when})")
        if diagnosis.failure_line_number is not None:
            parts.append(f"failure at line {diagnosis.failure_line_number} (d)")
        return "\n" + "  -  ".join(parts) if parts else ""

    def _diagnose(self, path: str) -> None:
        """Diagnose an ended server's log once per version of the file (in the reader thread)."""
        try:
            info = os.stat(path)
        except OSError:
            return
        key = (path, info.st_size, info.st_mtime_ns)
        if key == self._diagnosed:
            return
        try:
            diagnosis: Diagnosis | None = diagnose_file(path)
        except ConsoleError:
            diagnosis = None
        self._diagnosed = key
        call_live(self, self._diagnosis_ready, diagnosis)

    def _diagnosis_ready(self, diagnosis: Diagnosis | None) -> None:
        self._diagnosis = diagnosis
        self.refresh_data()

    def _secrets(self, server: ServerView) -> set[str]:
        names = [str(server.plan.get("api_key_env"))] if server.plan.get("api_key_env") else []
        return secret_values(os.environ, names)

    @work(thread=True, group="log-read")
    def _read(self, path: str, secrets: set[str], ended: bool) -> None:
        try:
            if ended:
                self._diagnose(path)
            if self._follower is None or self._follower.path != path:
                first = [
                    redact_text(line, secrets) for line in tail_lines(path, MAX_LINES, 4 << 20)
                ]
                follower = LogFollower(path)
                follower.offset = os.path.getsize(path) if os.path.exists(path) else 0
                self._follower = follower
                call_live(self, self._append, first)
            else:
                new = [redact_text(line, secrets) for line in self._follower.read_new_lines()]
                if new:
                    call_live(self, self._append, new)
        finally:
            self._reading = False

    def _styled(self, line: str, current: bool = False) -> Text:
        text = Text(line, style="bold red" if is_error_line(line) else "")
        if self.pattern is not None:
            text.highlight_regex(self.pattern, style=CURRENT_STYLE if current else MATCH_STYLE)
        return text

    def _append(self, lines: list[str]) -> None:
        found = self.query("#log").results(LogView)
        log = next(found, None)
        if log is None or self.remote is not None:
            # A reader's lines landed after the screen left (the app closing), or after it
            # turned to another host's server.
            return
        dropped = max(0, len(self.lines) + len(lines) - MAX_LINES)
        self.lines.extend(lines)
        self._appended += len(lines)
        if self.match_at >= 0:
            # The oldest lines went: the current match moved up (or went with them).
            self.match_at = self.match_at - dropped if self.match_at >= dropped else -1
        log.append([self._styled(line) for line in lines], scroll_end=self.follow)

    def _redraw(self) -> None:
        log = self.query_one("#log", LogView)
        log.clear()
        log.append(
            [self._styled(line, i == self.match_at) for i, line in enumerate(self.lines)],
            scroll_end=False,
        )

    def match_lines(self) -> list[int]:
        """The indices of the lines the search matches (cached until the log or the
        search changes)."""
        pattern = self.pattern
        if pattern is None:
            return []
        key = (pattern.pattern, self._appended, len(self.lines), self.server_id)
        if self._matches[0] != key:
            found = [i for i, line in enumerate(self.lines) if pattern.search(line)]
            self._matches = (key, found)
        return self._matches[1]

    def match_counter(self) -> str:
        """`match 3 of 28`, `28 matches` before the first jump, `no match`."""
        matches = self.match_lines()
        if not matches:
            return "no match"
        if self.match_at in matches:
            return f"match {matches.index(self.match_at) + 1} of {len(matches)}"
        return f"{len(matches)} matches (enter, n/N jump)"

    # -- actions -------------------------------------------------------------------------

    def action_cycle(self, step: int) -> None:
        servers = self.backend.servers()
        if not servers:
            return
        if self.remote is not None:
            self.show_server(servers[0 if step > 0 else -1].id)
            return
        ids = [s.id for s in servers]
        index = ids.index(self.server_id) if self.server_id in ids else -1
        self.show_server(ids[(index + step) % len(ids)])

    def action_follow(self) -> None:
        self.follow = not self.follow
        log = self.query_one("#log", LogView)
        log.auto_scroll = self.follow
        if self.follow:
            log.scroll_end(animate=False)
        self.refresh_data()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`/` types a slash in the search bar (paths are searched for too)."""
        return not (action == "search" and typing(self))

    def action_search(self) -> None:
        """`/`: the search bar under the log; matches light up as you type."""
        self.query_one(FilterBar).open()

    def _set_pattern(self, text: str) -> None:
        wanted = text or None
        if wanted == (self.pattern.pattern if self.pattern else None):
            return
        if not text:
            self.pattern = None
        else:
            try:
                self.pattern = re.compile(text, re.IGNORECASE)
            except re.error:  # half-typed or plain text: matched literally
                self.pattern = re.compile(re.escape(text), re.IGNORECASE)
        self.match_at = -1
        self._redraw()
        self.refresh_data()

    def on_filter_bar_changed(self, event: FilterBar.Changed) -> None:
        if self._typing is not None:
            self._typing.stop()
        text = event.text
        self._typing = self.set_timer(TYPING_PAUSE_S, lambda: self._set_pattern(text))

    def on_filter_bar_submitted(self, event: FilterBar.Submitted) -> None:
        if self._typing is not None:
            self._typing.stop()
            self._typing = None
        self._set_pattern(event.text)
        if self.pattern is not None:
            self.action_next_match(-1 if event.backwards else 1)

    def action_wrap(self) -> None:
        """Wrap long lines at the pane's width, or let them run off (scrolled sideways)."""
        log = self.query_one("#log", LogView)
        log.set_wrap(not log.wrap)
        if self.match_at >= 0:
            log.scroll_to(y=max(0, log.line_y(self.match_at) - 3), animate=False)
        elif self.follow:
            log.scroll_end(animate=False)

    def action_clear_search(self) -> None:
        """Escape: drop the search (and its highlights)."""
        if self.pattern is not None:
            self.query_one(FilterBar).clear()
            self._set_pattern("")
        else:
            self.set_focus(None)

    def _jump(self, predicate: object, step: int, what: str) -> None:
        lines = list(self.lines)
        if not lines:
            return
        start = self.match_at if self.match_at >= 0 else (len(lines) - 1 if step < 0 else -1)
        for offset in range(1, len(lines) + 1):
            index = (start + step * offset) % len(lines)
            if callable(predicate) and predicate(lines[index]):
                self._mark(index)
                self.follow = False
                log = self.query_one("#log", LogView)
                log.auto_scroll = False
                log.scroll_to(y=max(0, log.line_y(index) - 3), animate=False)
                self.refresh_data()
                return
        self.notify(f"no {what}", severity="warning")

    def _mark(self, index: int) -> None:
        """Make line `index` the current one: its matches change colour, the last one's
        change back."""
        before, self.match_at = self.match_at, index
        log = self.query_one("#log", LogView)
        lines = self.lines
        if self.pattern is not None and 0 <= before < len(lines) and before != index:
            log.restyle(before, self._styled(lines[before]))
        if self.pattern is not None and 0 <= index < len(lines):
            log.restyle(index, self._styled(lines[index], current=True))

    def action_next_match(self, step: int) -> None:
        pattern = self.pattern
        if pattern is None:
            self.action_search()
            return
        self._jump(lambda line: bool(pattern.search(line)), step, f"match for /{pattern.pattern}/")

    def action_next_error(self) -> None:
        self._jump(is_error_line, 1, "error lines")

    def action_failure_line(self) -> None:
        """Scroll to the line the failure reason comes from."""
        failure = self._diagnosis.failure if self._diagnosis else None
        if failure is None or failure.line is None:
            self.notify("no failure line in this log", severity="warning")
            return
        server = self._server()
        wanted = redact_text(failure.line, self._secrets(server)) if server else failure.line
        self._mark(-1)
        self._jump(lambda line: line == wanted, 1, "failure line (the log was redacted or cut)")
