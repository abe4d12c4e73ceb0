"""A foreground run's progress on the terminal: a single redrawn line on a TTY, plain lines
otherwise (one at most every `PLAIN_EVERY_S` inside a level; the level's own end line comes
from the runner's events). Event lines print above the bar, never through it."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from console.bench.listing import LevelProgress, Progress

PLAIN_EVERY_S = 10.0
BAR_CELLS = 20
CLEAR = "\r\x1b[K"


def eta_text(seconds: float | None) -> str:
    """`ETA 1:05`, `ETA 42 s`, or `ETA ?` before it can be estimated."""
    if seconds is None:
        return "ETA ?"
    whole = round(seconds)
    if whole < 60:
        return f"ETA {whole} s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"ETA {hours}:{minutes:02d}:{secs:02d}" if hours else f"ETA {minutes}:{secs:02d}"


def run_eta_text(progress: Progress, live: LevelProgress | None) -> str:
    """` (run ETA 3:10)` when the run goes on after this level, else nothing."""
    left = progress.run_eta_s
    if left is None or (live is not None and live.eta_s is not None and left <= live.eta_s + 1):
        return ""
    return f" (run {eta_text(left)})"


def figures(live: LevelProgress, progress: Progress | None = None) -> str:
    """`8/16 requests, 1 error, 123.4 tok/s, ETA 42 s (run ETA 3:10)`."""
    done = f"{live.completed}/{live.total}" if live.total is not None else f"{live.completed}"
    errors = f", {live.errors} error{'s' if live.errors != 1 else ''}" if live.errors else ""
    tok_s = f"{live.output_tok_s:.1f} tok/s" if live.output_tok_s is not None else "- tok/s"
    run = "" if progress is None else run_eta_text(progress, live)
    return f"{done} requests{errors}, {tok_s}, {eta_text(live.eta_s)}{run}"


def plain_line(progress: Progress, live: LevelProgress) -> str:
    """`CELL: level 1 (concurrency 4, 2 of 3): 8/16 requests, 123.4 tok/s, ETA 42 s`, the
    level numbered as the runner's own lines number it."""
    where = f"level {live.position()} ({live.label})"
    return f"{progress.cell}: {where}: {figures(live, progress)}"


def bar_line(progress: Progress, live: LevelProgress, width: int) -> str:
    """`[######------]` plus the figures, cut to the terminal's width."""
    if live.total:
        filled = min(BAR_CELLS, BAR_CELLS * live.completed // live.total)
        bar = "[" + "#" * filled + "-" * (BAR_CELLS - filled) + "] "
    else:
        bar = ""
    text = f"{bar}L{live.position('/')} {live.label}: {figures(live, progress)}  {progress.cell}"
    return text[: max(10, width - 1)]


class ProgressPrinter:
    """Prints the runner's events and progress to `stream` (the CLI's progress stream)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self._bar_shown = False
        self._level: tuple[str | None, int] | None = None
        self._last_plain = 0.0

    def event(self, text: str) -> None:
        """A line of its own (a level started or ended, a server launched)."""
        self._clear()
        print(text, file=self.stream, flush=True)

    def progress(self, progress: Progress) -> None:
        live = progress.live
        if live is None:
            return
        key = (progress.cell, live.index)
        now = self.clock()
        if key != self._level:
            # A new level: its first plain line comes `PLAIN_EVERY_S` into it.
            self._level = key
            self._last_plain = now
        if self.tty:
            width = shutil.get_terminal_size((100, 24)).columns
            self.stream.write(CLEAR + bar_line(progress, live, width))
            self.stream.flush()
            self._bar_shown = True
        elif now - self._last_plain >= PLAIN_EVERY_S and live.completed:
            self._last_plain = now
            print(plain_line(progress, live), file=self.stream, flush=True)

    def close(self) -> None:
        """Take the bar away (before the summary prints)."""
        self._clear()

    def _clear(self) -> None:
        if self._bar_shown:
            self.stream.write(CLEAR)
            self.stream.flush()
            self._bar_shown = False
