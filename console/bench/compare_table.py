"""A comparison of runs as table cells (pure): a column per shown metric, each holding every
run's figure and, after run A's, the change against A with `*` when beyond noise.

The CLI joins the cells' text; the Runs screen colours the changes beyond noise by whether
they are better or worse.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.bench.compare import NOISE_FLOOR, NOISE_RULE, NOISE_Z, CompareResult, MetricValues
from console.bench.noise import MIN_BLOCK_REQUESTS, MIN_BLOCKS
from console.bench.tables import COLUMNS, COMPARE_SHOWN, fmt

BEYOND = "*"


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of a cell's text; `better` True/False on a change beyond noise, else None."""

    text: str
    better: bool | None = None


Cell = tuple[Piece, ...]


def compare_headers(result: CompareResult) -> list[str]:
    letters = " / ".join(run.label for run in result.runs)
    return [
        "CELL",
        "CONC",
        *(f"{header.rsplit(' A / B', 1)[0]} {letters}" for _, header, _ in COMPARE_SHOWN),
    ]


def _metric_cell(pair: MetricValues, spec: str, scale: float) -> Cell:
    pieces: list[Piece] = []
    for index, value in enumerate(pair.values):
        if index:
            pieces.append(Piece(" / "))
        pieces.append(Piece(fmt(value, spec, scale)))
        change = pair.change_pct(index) if index else None
        if change is None:
            continue
        beyond = pair.beyond_noise(index)
        mark = BEYOND if beyond else ""
        pieces.append(Piece(f" ({change:+.0f}%{mark})", pair.better(index) if beyond else None))
    return tuple(pieces)


def compare_cells(result: CompareResult) -> list[list[Cell]]:
    """A row per common cell and level: its cell, its load, then each shown metric."""
    rows = []
    for row in result.rows:
        cells: list[Cell] = [(Piece(row.cell),), (Piece(row.load_label),)]
        for name, _, spec in COMPARE_SHOWN:
            column = COLUMNS[name]
            cells.append(_metric_cell(row.metric(name), spec or column.spec, column.scale))
        rows.append(cells)
    return rows


def text(cell: Cell) -> str:
    return "".join(piece.text for piece in cell)


def compare_text_rows(result: CompareResult) -> list[list[str]]:
    return [[text(cell) for cell in row] for row in compare_cells(result)]


def run_lines(result: CompareResult) -> list[str]:
    """`A = run id (name)` per run."""
    return [f"{run.label} = {run.run_id} ({run.name})" for run in result.runs]


def noise_line(result: CompareResult) -> str:
    """The rule, and a note when no difference could be judged."""
    if result.judged or not result.rows:
        return NOISE_RULE
    return (
        f"{NOISE_RULE}; here none could be judged (no per-request data, or every level under "
        f"{MIN_BLOCKS * MIN_BLOCK_REQUESTS} counted requests: run more with --requests)"
    )


def noise_short(result: CompareResult) -> str:
    """The rule in one line, for a narrow screen (`--json` and the CLI say it in full)."""
    if not result.judged and result.rows:
        return (
            "no noise verdict: no per-request data or levels < "
            f"{MIN_BLOCKS * MIN_BLOCK_REQUESTS} requests (--requests)"
        )
    return (
        f"{BEYOND} over {NOISE_Z:g}x the within-run standard error (batch means) and "
        f"{NOISE_FLOOR:.0%} of A: a noise heuristic"
    )


def only_lines(result: CompareResult) -> list[str]:
    return [f"only in {', '.join(labels)}: {item}" for item, labels in result.only]
