"""Run summaries, comparisons and live level progress as Rich renderables."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from console.bench.compare import CompareResult
from console.bench.compare_table import (
    Cell,
    compare_cells,
    compare_headers,
    noise_line,
    noise_short,
    only_lines,
    text,
)
from console.bench.results import RunSummary
from console.bench.tables import (
    METRIC_NOTE,
    SUMMARY_HEADERS,
    SideBySide,
    best_line,
    headers,
    judged,
    knee_lines,
    latency_headers,
    latency_rows,
    rank_lines,
    scaling_tables,
    several_models,
    slo_rows,
    slo_title,
    slo_view,
    summary_rows,
    window_line,
    workload_line,
)

# Which columns go first when the pane is too narrow for all (the last listed go first);
# the numbers an expert reads first stay. Columns not listed go before any listed.
KEEP_ORDER = (
    "VARIANT",
    "CONC",
    "CELL",
    "TOK/S",
    "GOODPUT",
    "SLO MET",
    "PASS",
    "TOK/S A / B",
    "ACCEPT/STEP",
    "ACCEPT A / B",
    "SPEEDUP",
    "TTFT P50/P99",
    "TTFT P50",
    "TTFT P50 A / B",
    "TTFT P99",
    "ITL P50/P99",
    "ITL P50",
    "ITL P50 A / B",
    "ITL P99",
    "STEP MS",
    "STEP MS A / B",
    "E2E P50",
    "TTFT P90",
    "ITL P90",
    "E2E P99",
    "VERIFY/STEP",
    "REQUESTS",
    "LAYOUT",
    "PROFILE",
)
LEFT = {"PROFILE", "LAYOUT", "VARIANT", "CELL", ""}


def rows_table(
    headers: Sequence[str], rows: list[list[str]], width: int, essential: Sequence[str] = ()
) -> Table:
    """A table of whole columns: when it does not fit, the least important columns go,
    never a value cut in half; `essential` columns go last (after VARIANT)."""
    natural = [max([len(h), *(len(r[i]) for r in rows)]) + 1 for i, h in enumerate(headers)]
    order = (*essential, *(h for h in KEEP_ORDER if h not in essential))
    rank = {h: n for n, h in enumerate(order)}
    keep = list(range(len(headers)))
    by_importance = sorted(keep, key=lambda i: rank.get(headers[i], len(KEEP_ORDER)))
    while len(keep) > 1 and sum(natural[i] for i in keep) > width:
        keep.remove(by_importance.pop())
    table = Table(box=None, padding=(0, 1, 0, 0), header_style="bold", show_edge=False)
    for index in keep:
        table.add_column(
            headers[index],
            justify="left" if headers[index] in LEFT else "right",
            no_wrap=True,
        )
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    return table


def side_by_side(side: SideBySide, width: int) -> Table:
    """The models as columns; when that is wider than the pane, the models as rows (every
    model stays, whatever the width)."""
    natural = [
        max([len(h), *(len(row[i]) for row in side.rows)]) + 1 for i, h in enumerate(side.headers)
    ]
    if sum(natural) <= width:
        return rows_table(side.headers, side.rows, width, essential=side.headers)
    headers = ("model", *(row[0] for row in side.rows))
    rows = [
        [side.headers[column], *(row[column] for row in side.rows)]
        for column in range(1, len(side.headers))
    ]
    return rows_table(headers, rows, width, essential=headers)


def summary_view(summary: RunSummary, width: int) -> RenderableType:
    scale = summary.time_scale
    head = Text.assemble(
        (f"{summary.run_id}", "bold"),
        f"  {summary.name or ''}  ",
        (f"[{summary.status}]", "green" if summary.status == "done" else "yellow"),
    )
    if scale != 1:
        head.append(f"  simulator time x{scale:g}", style="dim")
    sent = workload_line(summary)
    if sent:
        head.append(f"\n{sent}", style="dim")
    # Cells of several models: the profile tells their rows apart, so it stays.
    essential = ("PROFILE",) if several_models(summary) else ()
    parts: list[RenderableType] = [
        head,
        rows_table(SUMMARY_HEADERS, summary_rows(summary), width, essential),
        Text(""),
        Text("latency (ms)", style="bold"),
        rows_table(latency_headers(summary), latency_rows(summary), width, essential),
    ]
    if judged(summary):
        parts += [Text(""), Text(slo_title(summary), style="bold")]
        parts.append(rows_table(headers(slo_view(summary)), slo_rows(summary), width, essential))
        parts += [Text(line) for line in knee_lines(summary)]
    ranks = rank_lines(summary)
    if ranks:
        parts += [Text(""), Text("per DP rank", style="bold")]
        parts += [Text(line) for line in ranks]
    for side in scaling_tables(summary):
        parts += [Text(""), Text(side.title, style="bold")]
        parts.append(side_by_side(side, width))
    for finding in summary.findings:
        parts.append(Text(""))
        parts.append(
            Text.assemble(("! ", "bold yellow"), (finding.kind, "bold"), f": {finding.message}")
        )
    if summary.best:
        parts.append(Text(f"best per level: {best_line(summary)}"))
    parts.append(Text(METRIC_NOTE, style="dim"))
    window = window_line(summary)
    if window:
        parts.append(Text(window, style="dim"))
    parts.append(Text(f"files: {summary.run_dir}", style="dim"))
    return Group(*parts)


def compare_view(result: CompareResult, width: int) -> RenderableType:
    """Two runs or more side by side; a change beyond noise green when better, red when
    worse. Metric columns go from the right when the pane is too narrow."""
    parts: list[RenderableType] = [
        Text.assemble((f"{run.label} ", "bold"), f"{run.run_id} ({run.name})")
        for run in result.runs
    ]
    if result.rows:
        parts.append(_compare_table(result, width))
        # The rule in full where it fits in two lines, else in one short line.
        full = noise_line(result)
        parts.append(Text(full if len(full) <= 2 * width else noise_short(result), style="dim"))
    else:
        parts.append(Text("no cell and level in common", style="yellow"))
    parts += [Text(line, style="dim") for line in only_lines(result)]
    return Group(*parts)


def _compare_table(result: CompareResult, width: int) -> Table:
    headers = compare_headers(result)
    rows = compare_cells(result)
    natural = [max([len(h), *(len(text(r[i])) for r in rows)]) + 1 for i, h in enumerate(headers)]
    keep = len(headers)
    while keep > 3 and sum(natural[:keep]) > width:
        keep -= 1
    table = Table(box=None, padding=(0, 1, 0, 0), header_style="bold", show_edge=False)
    for index in range(keep):
        table.add_column(headers[index], justify="left" if index == 0 else "right", no_wrap=True)
    for row in rows:
        table.add_row(*(_styled(cell) for cell in row[:keep]))
    return table


def _styled(cell: Cell) -> Text:
    out = Text()
    for piece in cell:
        style = "" if piece.better is None else ("bold green" if piece.better else "bold red")
        out.append(piece.text, style=style)
    return out


def middle_cut(text: str, width: int) -> str:
    """`text` in at most `width` cells: the middle goes, a third of the room for its start
    and the rest for its end (where run names differ: variant, budget, layout)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = (width - 1) // 3
    tail = width - 1 - head
    return text[:head] + "…" + text[len(text) - tail :]


def distinct_names(runs: Sequence[tuple[str, str]], width: int) -> list[str]:
    """Each (run id, name) as a label of at most `width` cells that no other run shares:
    the name cut in the middle; runs that would still look alike (the same name, twice)
    get their start time from the id in front (`02:08:36 bench-kimi…eagle3`), and where
    even that collides, the id's unique tail."""
    labels = [middle_cut(name or run_id, width) for run_id, name in runs]
    for index in _clashing(labels):
        run_id, name = runs[index]
        stamp = _RUN_TIME.match(run_id)
        if stamp is not None and width >= 16:
            when = f"{stamp[1]}:{stamp[2]}:{stamp[3]}"
            labels[index] = f"{when} {middle_cut(name or run_id, width - len(when) - 1)}"
    clashing = _clashing(labels)
    alike = list(labels)
    for index in clashing:
        others = [runs[i][0] for i in clashing if alike[i] == alike[index] and i != index]
        labels[index] = _around_difference(runs[index][0], others, width)
    return labels


def _around_difference(run_id: str, others: list[str], width: int) -> str:
    """The part of `run_id` where it first differs from `others`, cut to `width` cells."""
    if len(run_id) <= width:
        return run_id
    differs = min((_shared_start(run_id, other) for other in others), default=0)
    keep = max(1, width - 2)
    start = max(0, min(differs - keep // 2, len(run_id) - keep))
    piece = run_id[start : start + keep]
    return ("…" if start > 0 else "") + piece + ("…" if start + keep < len(run_id) else "")


_RUN_TIME = re.compile(r"^\d{8}-(\d{2})(\d{2})(\d{2})")
"""A run id starts with its creation time, `YYYYMMDD-HHMMSS-`."""


def _clashing(labels: list[str]) -> list[int]:
    seen: dict[str, int] = {}
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
    return [index for index, label in enumerate(labels) if seen[label] > 1]


def _shared_start(first: str, second: str) -> int:
    """How many leading characters two strings share."""
    count = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        count += 1
    return count
