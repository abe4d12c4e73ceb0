"""The console application: six modes over one backend, refreshed when its data moves.

The app owns one refresh timer; on each tick it asks the backend for its version and, only
if it moved (or the screen changed), tells the shown screen to re-read. Nothing here blocks:
lifecycle and benchmark actions run on worker threads inside the screens.
"""

from __future__ import annotations

import gc
import importlib
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.actions import ActionParseResult, parse
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.notifications import SeverityLevel
from textual.screen import Screen

from console.tui.backend import Backend
from console.tui.host_choice import HOST_MODES, HostChoice, HostPicker
from console.tui.read_only import CHANGING_ACTIONS, live_read_only, refusal
from console.tui.remote_calls import remote_calls
from console.tui.screens.base import ConsoleScreen
from console.tui.screens.modals import ConfirmScreen, HelpScreen

MODE_KEYS = (
    ("d", "dashboard", "Dashboard", "servers, live charts, GPUs by NUMA node, sources"),
    ("s", "servers", "Servers", "launch, stop, restart, switch; plans and startup phases"),
    ("b", "bench", "Bench", "benchmark a ready server, run campaigns, follow progress"),
    ("r", "runs", "Runs", "results on disk: detail, findings, plots, compare runs"),
    ("l", "logs", "Logs", "a server's log: follow, search, errors, failure reason"),
    ("t", "topology", "Topology", "GPUs x NUMA nodes x PCIe; intended vs actual binding"),
    ("h", "fleet", "Fleet", "every host of hosts.toml: state, GPUs busy, servers, tok/s"),
)
REPLAY_SEEK_S = 10.0
REPLAY_JUMP = 60
"""Seek steps that shift+left/right take (10 min)."""
GLOBAL_ACTIONS = (
    ("Launch a server", "servers", "launch", "choose profile, layout and variant; confirm"),
    ("Switch a server", "servers", "switch", "stop the selected server, launch another plan"),
    ("Stop a server", "servers", "stop", "stop (or forget) the selected server, confirmed"),
    ("Benchmark a server", "bench", "bench", "load the selected ready server, confirmed"),
    ("Run a campaign", "bench", "campaign", "run the selected campaign file, confirmed"),
    ("Stop a run", "bench", "stop_run", "stop the selected running benchmark or campaign"),
)
"""(title, mode, screen action, help) offered in the palette from every screen: each runs
the same action, and asks the same confirmation, as its key on that mode's screen."""


MODE_SCREENS = {
    "dashboard": ("dashboard", "DashboardScreen"),
    "servers": ("servers", "ServersScreen"),
    "bench": ("bench", "BenchScreen"),
    "runs": ("runs", "RunsScreen"),
    "logs": ("logs", "LogsScreen"),
    "topology": ("topology", "TopologyScreen"),
    "fleet": ("fleet", "FleetScreen"),
}
"""Each mode's screen class, as (module under console.tui.screens, class name)."""


def _screen(mode: str, backend: Backend) -> ConsoleScreen:
    """A mode's screen over the backend, imported when the mode is first shown (a faster
    first frame)."""
    module, name = MODE_SCREENS[mode]
    screen_class: type[ConsoleScreen] = getattr(
        importlib.import_module(f"console.tui.screens.{module}"), name
    )
    return screen_class(backend)


class ConsoleApp(App[None]):
    TITLE = "ddconsole"
    BINDINGS: ClassVar[list[BindingType]] = [
        *[Binding(key, f"mode('{mode}')", title, show=False) for key, mode, title, _ in MODE_KEYS],
        Binding("H", "choose_host", "Host"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit_console", "Quit"),
        Binding("escape", "blur", "Leave field", show=False),
        Binding("space", "replay_toggle", "Play/pause"),
        Binding("left", "replay_seek(-1)", "Back 10s", show=False),
        Binding("right", "replay_seek(1)", "Fwd 10s", show=False),
        Binding("shift+left", f"replay_seek({-REPLAY_JUMP})", "Back 10 min", show=False),
        Binding("shift+right", f"replay_seek({REPLAY_JUMP})", "Fwd 10 min", show=False),
        Binding("home", "replay_to(0)", "Replay start", show=False),
        Binding("end", "replay_to(1)", "Replay end", show=False),
        Binding("comma", "replay_step(-1)", "Step back", key_display=","),
        Binding("full_stop", "replay_step(1)", "Step", key_display="."),
    ]

    def __init__(
        self,
        backend: Backend,
        *,
        refresh_s: float = 1.0,
        mode: str = "dashboard",
        warm_up: bool = False,
    ) -> None:
        super().__init__()
        self.backend = backend
        # Each mode's screen is built with the backend it shows (Textual's MODES holds
        # factories without arguments, so the modes are added per instance).
        for name in MODE_SCREENS:
            self.add_mode(name, partial(_screen, name, backend))
        self.warm_up = warm_up
        """A long session: once the data flows, build every mode's screen unseen and
        freeze the start-up objects out of the garbage collector."""
        self.refresh_s = refresh_s
        self.initial_mode = mode
        self._shown: tuple[int, int] = (-1, -1)
        self.built_modes: set[str] = set()
        """Modes whose screen the warm-up has built."""
        self.notices: deque[str] = deque(maxlen=100)
        """Every notice given, newest last (for tests and the record of a session)."""
        self.ticks = 0
        self.renders = 0
        """Screen refreshes done (the cost a static dashboard must not pay each tick)."""
        self.host_choice = HostChoice(backend)
        """The host Dashboard and Topology show (`H`, only with a fleet of several hosts)."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Notices go on the mode screen's notice line, above the key bar, where they hide
        no table row; a dialog's own notices stay toasts (the dialog is on top anyway).
        Safe from any thread, as Textual's is."""
        self.call_later(self._notice, message, title, severity, timeout, markup)

    def _notice(
        self,
        message: str,
        title: str,
        severity: SeverityLevel,
        timeout: float | None,
        markup: bool,
    ) -> None:
        self.notices.append(message)
        timeout = self.NOTIFICATION_TIMEOUT if timeout is None else timeout
        screen = self.screen if self.screen_stack else None
        if isinstance(screen, ConsoleScreen) and screen.show_notice(message, severity, timeout):
            return
        # The notice line shows plain text; so does its stand-in over a dialog.
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    def delay_update(self, delay: float = 0.05) -> None:
        """Textual holds painting for 50 ms to mask a mode switch while the new screen
        settles; the mode screens here are built once and kept, so the new one paints on
        the next frame. (Positive: Textual's timer divides by its interval.)"""
        super().delay_update(0.001)

    async def on_mount(self) -> None:
        await self.switch_mode(self.initial_mode)
        self.set_interval(self.refresh_s, self.tick)
        # The first frame shows the layout and the host; data sources start right after.
        self.call_after_refresh(self._launch_backend)

    def _launch_backend(self) -> None:
        self.run_worker(self._start_backend(), group="backend")

    async def _start_backend(self) -> None:
        await self.backend.start()
        self.refresh_now()
        if self.warm_up:
            self.call_after_refresh(self._launch_warm_up)

    def _launch_warm_up(self) -> None:
        self.run_worker(self._build_every_mode(), group="warm-up")

    async def _build_every_mode(self) -> None:
        """Build every mode's screen unseen: the first visit of a screen then costs what a
        later one does (composing and styling a screen took ~100 ms of a key press).

        Each mode is switched to and straight back without yielding, so no key ever meets
        a screen that is not shown; twice, because Textual refreshes a screen's CSS again
        the first time it is shown mounted."""
        for _ in range(2):
            mounts = []
            shown = self.current_mode
            with self.batch_update():
                for mode in MODE_SCREENS:
                    if mode != shown:
                        mounts.append(self.switch_mode(mode))
                        self.switch_mode(shown)
                        self.built_modes.add(mode)
            for mount in mounts:
                await mount
        _freeze_long_lived_objects()

    async def on_unmount(self) -> None:
        self.host_choice.close()
        await self.backend.stop()

    def tick(self) -> None:
        self.ticks += 1
        if not self.screen_stack:
            return  # the app is closing: its timer can fire once more after the last screen
        if self.host_choice.follow():
            self.refresh_bindings()  # `H` comes (or goes) with the fleet
        screen = self.screen
        if not isinstance(screen, ConsoleScreen):
            return
        state = (self.backend.version(), id(screen))
        if self.backend.replay is not None:
            screen.refresh_topbar()
        if state != self._shown:
            self._shown = state
            self.renders += 1
            screen.refresh_data()

    def refresh_now(self) -> None:
        """Re-render the current screen at once (after a mode switch or a replay seek)."""
        self._shown = (-1, -1)
        self.tick()

    # -- navigation ----------------------------------------------------------------------

    async def action_mode(self, mode: str) -> None:
        if self.current_mode != mode:
            await self.switch_mode(mode)
        self._shown = (self.backend.version(), id(self.screen))

    def on_console_screen_show_logs(self, message: ConsoleScreen.ShowLogs) -> None:
        self.show_logs(message.server_id)

    def show_logs(self, server_id: str) -> None:
        async def go() -> None:
            await self.switch_mode("logs")
            show = getattr(self.screen, "show_server", None)
            if show is not None:
                show(server_id)

        self.run_worker(go(), group="navigate")

    def action_blur(self) -> None:
        self.screen.set_focus(None)

    def action_help(self) -> None:
        screen = self.screen
        if not isinstance(screen, ConsoleScreen):
            return
        rows: list[tuple[str, str]] = []
        for binding in screen.BINDINGS:
            if isinstance(binding, Binding):
                rows.append((binding.key_display or binding.key, binding.description))
        rows += [(key, f"{title}: {what}") for key, _, title, what in MODE_KEYS]
        if self.host_choice.available():
            rows.append(("H", "the host Dashboard and Topology show (local or a fleet host)"))
        rows += [
            ("?", "this help"),
            (
                "ctrl+p",
                "command palette: this screen's actions, launch, switch, stop, bench, "
                "campaign, stop a run, snapshot, recording",
            ),
            ("q", "quit"),
        ]
        if self.backend.replay is not None:
            rows += [
                ("space", "play / pause the replay"),
                ("← →", f"seek {REPLAY_SEEK_S:.0f} s"),
                ("shift+← →", f"seek {REPLAY_SEEK_S * REPLAY_JUMP / 60:.0f} min"),
                ("home end", "to the start / the end"),
                (", .", "step one frame back / forward"),
            ]
        note = self.quit_note()
        if live_read_only(self.backend):
            note = f"{refusal(self.backend)}. {note}"
        self.push_screen(HelpScreen(screen.TITLE, rows, note))

    async def run_action(
        self,
        action: str | ActionParseResult,
        default_namespace: DOMNode | None = None,
        namespaces: Mapping[str, DOMNode] | None = None,
    ) -> bool:
        """Every key, click and palette entry comes through here: a read-only console
        refuses the actions that change work, with the reason and the way out."""
        name = (parse(action) if isinstance(action, str) else action)[1]
        if self.backend.read_only and name in CHANGING_ACTIONS:
            self.notify(refusal(self.backend), severity="warning", timeout=6)
            return True
        return await super().run_action(action, default_namespace, namespaces)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for key, mode, title, what in MODE_KEYS:
            yield SystemCommand(
                f"{title} ({key})", what, lambda mode=mode: self.run_worker(self.action_mode(mode))
            )
        if isinstance(screen, ConsoleScreen):
            for binding in screen.BINDINGS:
                if isinstance(binding, Binding) and binding.show:
                    key = binding.key_display or binding.key
                    yield SystemCommand(
                        f"{binding.description} ({key})",
                        f"{screen.TITLE}: the same as pressing {key}",
                        self._runner(binding.action, screen),
                    )
        for title, mode, action, what in GLOBAL_ACTIONS:
            yield SystemCommand(title, what, self._runner(action, None, mode))
        yield SystemCommand(
            "Snapshot this screen",
            "save what is shown as SVG under the state folder",
            self._save_snapshot,
        )
        yield SystemCommand(
            "Recording", "where this session is recorded and how to replay it", self._recording
        )

    def _runner(
        self, action: str, screen: ConsoleScreen | None, mode: str | None = None
    ) -> Callable[[], None]:
        """A palette entry's callback: the action on `screen`, or on `mode`'s screen after
        switching to it (through `run_action`, so read-only refuses it here too)."""

        async def go() -> None:
            target: DOMNode | None = screen
            if mode is not None:
                await self.action_mode(mode)
                target = self.screen
            await self.run_action(action, target)

        def start() -> None:
            self.run_worker(go(), group="palette")

        return start

    def _save_snapshot(self) -> None:
        folder = self.backend.runs_root.parent / "snapshots"
        name = f"{time.strftime('%Y%m%d-%H%M%S')}-{self.current_mode}.svg"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = Path(self.save_screenshot(name, str(folder)))
        except OSError as exc:
            self.notify(f"snapshot not saved: {folder}: {exc.strerror or exc}", severity="error")
            return
        self.notify(
            f"saved {path}; `ddconsole snapshot --out DIR` writes JSON and Markdown too",
            timeout=8,
        )

    def _recording(self) -> None:
        if self.backend.replay is not None:
            self.notify("this is a replay: space plays/pauses, ← → seek, , . step", timeout=8)
            return
        path = getattr(getattr(self.backend, "recorder", None), "path", None)
        if path is None:
            self.notify(
                "this session is not recorded (--no-record); start the console without "
                "--no-record to keep a flight recording",
                severity="warning",
                timeout=8,
            )
            return
        self.notify(f"recording to {path}; replay it with `ddconsole replay {path}`", timeout=8)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action.startswith("replay_"):
            return self.backend.replay is not None
        if action == "choose_host":
            return self.host_choice.available() and self.current_mode in HOST_MODES
        return True

    def action_choose_host(self) -> None:
        """Pick the host Dashboard and Topology show, from the fleet's hosts."""

        def chosen(name: str | None) -> None:
            if name is not None:
                self.host_choice.choose(name)
                self.refresh_now()

        picker = HostPicker(self.host_choice.summaries(), self.host_choice.chosen)
        self.push_screen(picker, chosen)

    # -- replay --------------------------------------------------------------------------

    def action_replay_toggle(self) -> None:
        if self.backend.replay is not None:
            self.backend.replay.toggle()
            self.refresh_now()

    def action_replay_seek(self, direction: int) -> None:
        replay = self.backend.replay
        if replay is not None:
            replay.seek(replay.position_s + direction * REPLAY_SEEK_S)
            self.refresh_now()

    def action_replay_to(self, end: int) -> None:
        """To the replay's start (0) or its end (1: as far as it is indexed yet)."""
        replay = self.backend.replay
        if replay is not None:
            replay.seek(replay.duration_s if end else 0.0)
            self.refresh_now()

    def action_replay_step(self, frames: int) -> None:
        if self.backend.replay is not None:
            self.backend.replay.step(frames)
            self.refresh_now()

    # -- quitting ------------------------------------------------------------------------

    def _cli(self, verb: str) -> str:
        """A CLI command that applies to this console's servers (demo ones need --demo)."""
        return f"`ddconsole {verb}{' --demo' if self.backend.demo else ''}`"

    def quit_note(self) -> str:
        if self.backend.replay is not None or (self.backend.read_only and not self._live()):
            return "q quits the replay."
        kind = "demo servers" if self.backend.demo else "servers"
        return (
            f"q quits the console only: {kind} and detached campaigns keep running "
            f"({self._cli('ps')} shows them, {self._cli('down --all')} stops them)."
        )

    def _live(self) -> bool:
        """A live console (read-only or not), not a replay or a snapshot."""
        return not self.backend.read_only or live_read_only(self.backend)

    def action_quit_console(self) -> None:
        running = remote_calls(self).described()
        if not running:
            self._quit()
            return
        if isinstance(self.screen, ConfirmScreen):
            return  # the question is already asked

        def answered(yes: bool | None) -> None:
            if yes:
                self._quit()

        calls = "; ".join(running)
        self.push_screen(
            ConfirmScreen(
                "Quit while a call to another host is running?",
                f"Still running: {calls}. It runs over this console's SSH connection: "
                "quitting closes it and ends the call there midway (a restart may leave "
                "its server stopped). Its answer comes in the Servers activity pane (a "
                "benchmark's start or stop there: as a notice).",
            ),
            answered,
        )

    def _quit(self) -> None:
        said = self.leaving_message()
        self.exit(message=None if said is None else Text(said))

    def leaving_message(self) -> str | None:
        """What quitting leaves running (servers, runs) and the commands that reach them;
        None when nothing is left (or this is a replay)."""
        if self.backend.replay is not None or not self._live():
            return None
        live = [s for s in self.backend.servers() if s.live]
        running = [r.run_id for r in self.backend.runs() if r.status == "running"]
        elsewhere = self._servers_elsewhere()
        if not live and not running and not elsewhere:
            return None
        said = []
        if live:
            kind = "demo server" if self.backend.demo else "server"
            plural = "s keep" if len(live) > 1 else " keeps"
            said.append(
                f"{len(live)} {kind}{plural} running ({', '.join(s.id for s in live)}): "
                f"{self._cli('ps')} shows them, {self._cli('down --all')} stops them."
            )
        if running:
            plural = "s keep" if len(running) > 1 else " keeps"
            said.append(
                f"{len(running)} run{plural} running ({', '.join(running)}): "
                f"{self._cli('runs stop ' + running[0])} stops "
                + ("it." if len(running) == 1 else "the first.")
            )
        if elsewhere:
            said.append(
                "On other hosts, "
                + ", ".join(f"{host}: {count}" for host, count in elsewhere.items())
                + " server(s) keep running (`ddconsole fleet` shows them)."
            )
        return "ddconsole: " + " ".join(said)

    def _servers_elsewhere(self) -> dict[str, int]:
        """Each other host's servers that had not ended at its latest reading (`local` is
        this console's own, named above)."""
        fleet = self.backend.fleet_now()
        if fleet is None:
            return {}
        counts = {
            summary.name: summary.servers_total
            for summary in fleet.summaries()
            if summary.name != "local" and summary.servers_total
        }
        return counts


def _freeze_long_lived_objects() -> None:
    """Move the ~100k objects alive after start-up (widgets, styles, imports) out of the
    garbage collector's view: a full collection over them stalled a key press by ~60 ms."""
    gc.collect()
    gc.freeze()
