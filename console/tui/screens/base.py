"""What every mode screen shares: the top bar, the key bar, and data refresh on demand."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen

from console.tui.backend import Backend
from console.tui.widgets.keybar import KeyBar
from console.tui.widgets.notice_line import NoticeLine
from console.tui.widgets.topbar import TopBar


class ConsoleScreen(Screen[None]):
    """A mode screen over the backend it is given. The app calls `refresh_data` when the
    backend's version moved while the screen is shown, and when the screen is shown again."""

    TITLE = "screen"

    class ShowLogs(Message):
        """Asks the app to show a server's log: the screen names the server, the app owns
        the modes."""

        def __init__(self, server_id: str) -> None:
            super().__init__()
            self.server_id = server_id

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.backend = backend

    def compose(self) -> ComposeResult:
        yield TopBar(self.TITLE, self.backend)
        yield from self.compose_body()
        yield NoticeLine()
        yield KeyBar()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_screen_resume(self) -> None:
        # Paint what the screen already shows first; fresh data follows a frame later.
        self.call_after_refresh(self.refresh_data)

    def refresh_data(self) -> None:
        """Re-read the backend and update widgets (cheap: no I/O, no blocking calls)."""

    def show_notice(self, message: str, severity: str, timeout: float) -> bool:
        """Show a notice above the key bar; False when the screen has no notice line yet."""
        lines = self.query(NoticeLine)
        if not lines:
            return False
        lines.first().show(message, severity, timeout)
        return True

    def refresh_topbar(self, note: str | None = None) -> None:
        for bar in self.query(TopBar):
            bar.update_bar(note)
