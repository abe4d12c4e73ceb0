"""The acceptance histograms of a run: per cell and level, how many drafts each verify step
accepted, as text bars laid out in as many columns as the pane has room for."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from console.bench.acceptance import histogram_rows
from console.bench.results import CellSummary, LevelSummary, RunSummary

BLOCK_WIDTH = 36
"""One level's histogram: its count labels, a bar and a percentage."""
GAP = 3
MAX_ROWS = 10
LABEL_WIDTH = 5
PERCENT_WIDTH = 4
BAR_WIDTH = BLOCK_WIDTH - LABEL_WIDTH - PERCENT_WIDTH - 2
EIGHTHS = " ▏▎▍▌▋▊▉█"
TITLE = "accepted drafts per verify step (bonus token not counted)"
LEGEND = "drop: the first draft position fewer than half of the steps accepted"


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """`fraction` (0..1) of `width` cells in block characters, to an eighth of a cell."""
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (EIGHTHS[part] if part else "")).ljust(width)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def level_block(cell: CellSummary, level: LevelSummary) -> Text | None:
    """One level's histogram with its heading; None when the level recorded none."""
    histogram = level.correct_drafts_histogram
    if not histogram:
        return None
    name = " ".join(part for part in (cell.name, cell.layout, cell.variant) if part)
    text = Text(_cut(name, BLOCK_WIDTH), style="bold", no_wrap=True, overflow="ellipsis")
    drop = level.accept_drop_position
    text.append(f"\nconc {level.load_label}" + (f" · drop at draft {drop}" if drop else ""))
    steps, carried = sum(histogram), level.correct_drafts_requests or 0
    text.append(f"\n{steps} steps · {carried}/{level.requests} requests", style="dim")
    spread = "/".join(
        _fmt(q) for q in (level.accept_length_p10, level.accept_length_p50, level.accept_length_p90)
    )
    text.append(f"\naccept/req p10/50/90 {spread}", style="dim")
    rows = histogram_rows(histogram, MAX_ROWS)
    top = max(row.share for row in rows) or 1.0
    for row in rows:
        text.append(f"\n{row.label:>{LABEL_WIDTH}} ")
        text.append(bar(row.share / top), style="green")
        text.append(f" {row.share:>{PERCENT_WIDTH - 1}.0%}")
    return text


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def acceptance_view(summary: RunSummary, width: int) -> RenderableType | None:
    """Every level's histogram, the cells at one load side by side (budgets next to each
    other) as the width allows; a one-line note when the run has speculative cells but no
    histogram (a server that did not send one); None for a run without speculation."""
    by_load: dict[str, list[Text]] = {}
    for cell in summary.cells:
        for level in cell.levels:
            block = level_block(cell, level)
            if block is not None:
                by_load.setdefault(level.load_label, []).append(block)
    if not by_load:
        if any(not cell.is_autoregressive and cell.levels for cell in summary.cells):
            return Text(
                "acceptance histogram: not recorded (no spec_correct_drafts_histogram)",
                style="dim",
            )
        return None
    widest = max(len(blocks) for blocks in by_load.values())
    columns = max(1, min(widest, (width + GAP) // (BLOCK_WIDTH + GAP)))
    grid = Table.grid(padding=(0, GAP, 0, 0))
    for _ in range(columns):
        grid.add_column(width=BLOCK_WIDTH, no_wrap=True)
    first = True
    for blocks in by_load.values():
        for start in range(0, len(blocks), columns):
            if not first:
                grid.add_row(*[Text("")] * columns)
            first = False
            row: list[RenderableType] = list(blocks[start : start + columns])
            row += [Text("")] * (columns - len(row))
            grid.add_row(*row)
    heading = Text.assemble((TITLE, "bold"), "  ", (LEGEND, "dim"))
    return Group(Text(""), heading, grid)
