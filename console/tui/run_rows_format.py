"""How a run's row and progress read on the Bench screen: its status, the NOW column, the
levels pane's line on the level in progress and the ETAs they carry. Pure: no widgets."""

from __future__ import annotations

from rich.text import Text

from console.bench.listing import LevelProgress, Progress, RunRow
from console.core.units import format_duration


def progress_bar(done: int, planned: int, width: int = 20) -> str:
    filled = 0 if planned <= 0 else min(width, round(width * done / planned))
    return "█" * filled + "░" * (width - filled)


def plain(prompt: object) -> str:
    return prompt.plain if isinstance(prompt, Text) else str(prompt)


def eta(level: LevelProgress | None) -> str:
    return "" if level is None or level.eta_s is None else f"ETA {short_duration(level.eta_s)}"


def short_duration(seconds: float) -> str:
    """`31s`, `2m05s`: an ETA to the second."""
    return f"{seconds:.0f}s" if seconds < 59.5 else format_duration(seconds)


def status_text(row: RunRow, *, narrow: bool) -> Text:
    """The status; a running row with a level in progress says how far it is, in the
    narrow list too (where there is no NOW column)."""
    if row.status != "running":
        return Text(row.status)
    level = row.level
    if not narrow or level is None:
        return Text(row.status, style="bold yellow")
    total = "?" if level.total is None else str(level.total)
    left = "" if level.eta_s is None else f" {short_duration(level.eta_s)}"
    return Text(f"▶{level.completed}/{total}{left}", style="bold yellow")


def level_numbers(level: LevelProgress) -> str:
    """`12/32 · 151.2 tok/s · 1 err · ETA 1m20s`."""
    total = "?" if level.total is None else str(level.total)
    parts = [f"{level.completed}/{total}"]
    if level.output_tok_s is not None:
        parts.append(f"{level.output_tok_s:.1f} tok/s")
    parts.append(f"{level.errors} err")
    if level.eta_s is not None:
        parts.append(eta(level))
    return " · ".join(parts)


def progress_text(progress: Progress | None, level: LevelProgress | None) -> str:
    """The NOW column, short enough for the runs list's half of the screen:
    `ddtree-b15 L2/3 12/32 151.2 tok/s 1 err ETA 1m20s` (the cell by its variant)."""
    if not progress:
        return ""
    variant = (progress.cell or "").rsplit("/", 1)[-1]
    if progress.phase is not None:
        return f"{variant} {progress.phase}{run_eta(progress)}"
    if level is None:
        return f"{variant} L{progress.level} {progress.done}/{progress.planned}"
    total = "?" if level.total is None else str(level.total)
    parts = [variant, f"L{level.position('/')}", f"{level.completed}/{total}"]
    if level.output_tok_s is not None:
        parts.append(f"{level.output_tok_s:.1f} tok/s")
    if level.errors:
        parts.append(f"{level.errors} err")
    if level.eta_s is not None:
        parts.append(eta(level))
    return " ".join(parts) + run_eta(progress, level)


def run_eta(progress: Progress, level: LevelProgress | None = None) -> str:
    """` · run ETA 3m10s` when the run goes on after what runs now, else nothing."""
    left = progress.run_eta_s
    if left is None or (level is not None and level.eta_s is not None and left <= level.eta_s + 1):
        return ""
    return f" · run ETA {short_duration(left)}"


def now_line(progress: Progress | None, level: LevelProgress | None) -> str:
    """The run detail's line on the level in progress, with its live numbers when the
    runner writes them."""
    if progress is None:
        return ""
    if progress.phase is not None:
        return f"now: {progress.cell} {progress.phase}{run_eta(progress)}"
    if level is None:
        return (
            f"now: {progress.cell} level {progress.level}  "
            f"{progress_bar(progress.done, progress.planned)} "
            f"{progress.done}/{progress.planned} requests"
        )
    done, planned = level.completed, level.total or 0
    return (
        f"now: {progress.cell} level {level.position('/')} ({level.label})  "
        f"{progress_bar(done, planned)} {level_numbers(level)} · "
        f"{format_duration(level.elapsed_s)} elapsed{run_eta(progress, level)}"
    )
