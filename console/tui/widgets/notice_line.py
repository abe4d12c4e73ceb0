"""Notices (an action's outcome, a refusal) on their own lines above the key bar.

Textual's toasts float over the screen's lower right corner, on top of whatever table is
there; these lines are docked instead, so the screen's content is laid out above them and
no row of a table is ever hidden by a notice.
"""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.widgets import Static

SHOWN = 2
"""Notices on screen at once: the newest ones."""
STYLES = {"error": "bold red", "warning": "yellow", "information": ""}


class NoticeLine(Static):
    DEFAULT_CSS = """
    NoticeLine {
        dock: bottom; margin-bottom: 1; height: auto; max-height: 4; width: 1fr;
        padding: 0 1; background: $boost; display: none;
    }
    """

    def __init__(self) -> None:
        super().__init__("")
        self._shown: deque[tuple[int, Text]] = deque(maxlen=SHOWN)
        self._count = 0

    def show(self, message: str, severity: str, timeout: float) -> None:
        """Add a notice; it goes after `timeout` seconds (or when newer ones push it out)."""
        self._count += 1
        number = self._count
        # The same notice again (a key pressed twice) replaces the one shown.
        kept = [(n, text) for n, text in self._shown if text.plain != message]
        self._shown.clear()
        self._shown.extend(kept)
        self._shown.append((number, Text(message, style=STYLES.get(severity, ""))))
        self.set_timer(max(0.5, timeout), lambda: self._expire(number))
        self._render_notices()

    def _expire(self, number: int) -> None:
        kept = [(n, text) for n, text in self._shown if n != number]
        self._shown.clear()
        self._shown.extend(kept)
        self._render_notices()

    def _render_notices(self) -> None:
        self.display = bool(self._shown)
        self.update(Text("\n").join(text for _, text in self._shown))

    @property
    def messages(self) -> list[str]:
        """The notices shown now, oldest first (for tests)."""
        return [text.plain for _, text in self._shown]
