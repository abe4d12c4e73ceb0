"""The line on top of every screen: where you are, badges (DEMO, REPLAY, READ-ONLY), the
keys."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from console.core.units import format_duration
from console.tui.backend import Backend
from console.tui.read_only import live_read_only

SCREEN_KEYS = "d s b r l t h ? q"


class TopBar(Static):
    DEFAULT_CSS = """
    TopBar { dock: top; height: 1; background: $panel; color: $text; }
    """

    def __init__(self, screen_name: str, backend: Backend) -> None:
        super().__init__()
        self.screen_name = screen_name
        self.backend = backend
        """What the badges read: demo mode, the replay's position and its damage note."""

    def on_mount(self) -> None:
        self.update_bar()

    def update_bar(self, note: str | None = None) -> None:
        text = Text.assemble((" ddconsole ", "bold"), (f" {self.screen_name} ", "reverse"))
        replay = self.backend.replay
        replay_note = replay.message if replay is not None else None
        if replay_note:
            text.append(f"  {replay_note}", style="bold red")
        if note:
            text.append(f"  {note}", style="italic")
        right = Text()
        if replay is not None:
            state = "▶" if replay.playing else "⏸"
            indexed = replay.indexed_fraction
            indexing = "" if indexed is None else f" indexing {indexed:.0%}"
            right.append(
                f" REPLAY {state} {format_duration(replay.position_s)}"
                f"/{format_duration(replay.duration_s)}{indexing} ",
                style="bold black on cyan",
            )
            right.append(" ")
        if live_read_only(self.backend):
            right.append(" READ-ONLY ", style="bold white on red")
            right.append(" ")
        if self.backend.demo:
            right.append(" DEMO ", style="bold black on yellow")
            right.append(" ")
        right.append(SCREEN_KEYS, style="dim")
        right.append(" ")
        width = max(self.size.width, 40)
        pad = width - text.cell_len - right.cell_len
        if pad < 1:
            text.truncate(max(0, width - right.cell_len - 1), overflow="ellipsis")
            pad = max(1, width - text.cell_len - right.cell_len)
        text.append(" " * pad)
        text.append_text(right)
        self.update(text)

    def on_resize(self) -> None:
        self.update_bar()
