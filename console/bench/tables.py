"""Run summaries as text: ONE column table behind every rendering.

`COLUMNS` names each column once (its CSV name, its header, how to read it from a cell and
level, its format). The terminal (`runs show`, the end-of-run print), the TUI tables,
`summary.md` and `summary.csv` are views: tuples of column names. A new level field shows
everywhere by adding its column here and its name to the views that should carry it.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from console.bench.acceptance import histogram_rows
from console.bench.prompt_check import prompt_len_note
from console.bench.results import CellSummary, LevelSummary, RunSummary

Value = float | int | str | None
Getter = Callable[[CellSummary, LevelSummary], Value]


def fmt(value: Value, spec: str, scale: float = 1.0) -> str:
    """`-` for a missing value (or NaN), else the value (times `scale`) in `spec`."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, str):
        return value
    return f"{value if scale == 1.0 else value * scale:{spec}}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    """One column: `name` heads it in CSV (the level field it shows, where it is one),
    `header` in the terminal, the TUI and Markdown."""

    name: str
    header: str
    get: Getter
    spec: str = ".1f"
    scale: float = 1.0
    """Shown value = value x scale (seconds shown as ms: 1000); CSV keeps the raw value."""
    suffix: str = ""
    """Appended to a shown value (not to `-`)."""
    parts: tuple[str, ...] = ()
    """A joined column (`TTFT P50/P99`): these columns' values in this column's format."""

    def text(self, cell: CellSummary, level: LevelSummary) -> str:
        if self.parts:
            return "/".join(
                fmt(COLUMNS[part].get(cell, level), self.spec, self.scale) for part in self.parts
            )
        value = self.get(cell, level)
        shown = fmt(value, self.spec, self.scale)
        return shown + self.suffix if value else shown

    def csv(self, cell: CellSummary, level: LevelSummary) -> str:
        value = self.get(cell, level)
        if value is None:
            return ""
        return f"{value:.6g}" if isinstance(value, float) else str(value)

    @property
    def per_cell(self) -> bool:
        """Reads the cell only (shown on a failed cell's row, which has no level)."""
        return self.name in CELL_COLUMNS


def _requests(_: CellSummary, level: LevelSummary) -> str:
    """`16 ok, 2 err`; a failed level also says why (`0 ok, 4 err; failed: HTTP 401: ...`),
    and so does one cut short with a reason (`3 ok, 1 err; interrupted: server stopped by
    user`)."""
    text = f"{level.requests} ok" + (f", {level.errors} err" if level.errors else "")
    if level.status in ("failed", "interrupted") and (level.reason or level.status == "failed"):
        text += f"; {level.status}: {level.reason or '?'}"
    return text


def _passed(_: CellSummary, level: LevelSummary) -> str | None:
    if level.slo_pass is None:
        return None
    if level.early_stop:
        # `stopped early: 3 of 16 requests missed ...`, `fell behind: 195 of 480 finished ...`.
        return f"FAIL ({level.early_stop.split(':', 1)[0]})"
    if level.behind:
        return "FAIL (fell behind)"
    return "pass" if level.slo_pass else "FAIL"


def _window_span(_: CellSummary, level: LevelSummary) -> str | None:
    """`2.0-6.0 s, 7 req` for a steady window, `all, 16 req` otherwise."""
    if level.window is None:
        return None
    counted = f"{level.counted_requests} req" if level.counted_requests is not None else "?"
    if level.window_start_s is None or level.window_end_s is None:
        return f"all, {counted}"
    return f"{level.window_start_s:.1f}-{level.window_end_s:.1f} s, {counted}"


def _column(
    name: str, header: str, get: Getter, spec: str = ".1f", scale: float = 1.0, suffix: str = ""
) -> Column:
    return Column(name=name, header=header, get=get, spec=spec, scale=scale, suffix=suffix)


def _ms(name: str, header: str, get: Getter, spec: str = ".1f") -> Column:
    return _column(name, header, get, spec, 1000.0)


def _joined(name: str, header: str, parts: tuple[str, ...], spec: str) -> Column:
    return Column(
        name=name, header=header, get=lambda c, lv: None, spec=spec, scale=1000.0, parts=parts
    )


_TABLE: tuple[Column, ...] = (
    # The cell.
    _column("profile", "PROFILE", lambda c, lv: c.profile, "s"),
    _column("cell", "PROFILE", lambda c, lv: c.name, "s"),
    _column("cell_key", "CELL", lambda c, lv: c.key, "s"),
    _column("layout", "LAYOUT", lambda c, lv: c.layout, "s"),
    _column("variant", "VARIANT", lambda c, lv: c.variant, "s"),
    _column("variant_or_server", "VARIANT", lambda c, lv: c.variant or c.server, "s"),
    _column("status", "STATUS", lambda c, lv: c.status, "s"),
    # The level's load and outcome.
    _column("load", "CONC", lambda c, lv: lv.load_label, "s"),
    _column("concurrency", "CONC", lambda c, lv: lv.concurrency, "d"),
    _column("rate", "RATE", lambda c, lv: lv.rate, "g"),
    _column("requests", "OK", lambda c, lv: lv.requests, "d"),
    _column("errors", "ERRORS", lambda c, lv: lv.errors, "d"),
    _column("request_outcome", "REQUESTS", _requests, "s"),
    _column("duration_s", "SECONDS", lambda c, lv: lv.duration_s, ".1f"),
    # Throughput and speculation (DESIGN 1's table).
    _column("output_tok_s", "TOK/S", lambda c, lv: lv.output_tok_s, ".1f"),
    _column("speedup_vs_off", "SPEEDUP", lambda c, lv: lv.speedup_vs_off, ".2f", suffix="x"),
    _column("verify_tokens_per_step", "VERIFY/STEP", lambda c, lv: lv.verify_tokens_per_step, "d"),
    _ms("step_time_s", "STEP MS", lambda c, lv: lv.step_time_s),
    _column(
        "accepted_tokens_per_step",
        "ACCEPT/STEP",
        lambda c, lv: lv.accepted_tokens_per_step,
        ".2f",
    ),
    _column("accept_ratio", "ACCEPT %", lambda c, lv: lv.accept_ratio, ".0%"),
    _column("accept_length", "ACCEPT", lambda c, lv: lv.accept_length, ".2f"),
    _column("accept_length_counters", "ACCEPT CTR", lambda c, lv: lv.accept_length_counters, ".2f"),
    _column(
        "accept_length_per_request",
        "ACCEPT REQ",
        lambda c, lv: lv.accept_length_per_request,
        ".2f",
    ),
    _column("accept_length_gauge", "ACCEPT GAUGE", lambda c, lv: lv.accept_length_gauge, ".2f"),
    _column("tokens_per_chunk", "TOK/CHUNK", lambda c, lv: lv.tokens_per_chunk, ".2f"),
    _column("effective_tok_s", "EFFECTIVE TOK/S", lambda c, lv: lv.effective_tok_s, ".1f"),
    # Latency (ms on screen, seconds in CSV).
    _ms("ttft_p50_s", "TTFT P50", lambda c, lv: lv.ttft.p50),
    _ms("ttft_p90_s", "TTFT P90", lambda c, lv: lv.ttft.p90),
    _ms("ttft_p95_s", "TTFT P95", lambda c, lv: lv.ttft.p95),
    _ms("ttft_p99_s", "TTFT P99", lambda c, lv: lv.ttft.p99),
    _ms("itl_p50_s", "ITL P50", lambda c, lv: lv.itl.p50),
    _ms("itl_p90_s", "ITL P90", lambda c, lv: lv.itl.p90),
    _ms("itl_p95_s", "ITL P95", lambda c, lv: lv.itl.p95),
    _ms("itl_p99_s", "ITL P99", lambda c, lv: lv.itl.p99),
    _ms("e2e_p50_s", "E2E P50", lambda c, lv: lv.e2e.p50),
    _ms("e2e_p99_s", "E2E P99", lambda c, lv: lv.e2e.p99),
    _ms("chunk_gap_p50_s", "GAP P50", lambda c, lv: lv.chunk_gap.p50),
    _ms("chunk_gap_p99_s", "GAP P99", lambda c, lv: lv.chunk_gap.p99),
    _joined("ttft_p50_p99", "TTFT P50/P99", ("ttft_p50_s", "ttft_p99_s"), ".0f"),
    _joined("itl_p50_p99", "ITL P50/P99", ("itl_p50_s", "itl_p99_s"), ".1f"),
    # Judged against the run's SLO, and the window the statistics count.
    _column("goodput_tok_s", "GOODPUT", lambda c, lv: lv.goodput_tok_s, ".1f"),
    _column("goodput_req_s", "GOOD REQ/S", lambda c, lv: lv.goodput_req_s, ".2f"),
    _column("slo_attainment", "SLO MET", lambda c, lv: lv.slo_attainment, ".0%"),
    _column("slo_pass", "PASS", _passed, "s"),
    _column("slo_ttft_attainment", "TTFT MET", lambda c, lv: lv.slo_ttft_attainment, ".0%"),
    _column("slo_itl_attainment", "ITL MET", lambda c, lv: lv.slo_itl_attainment, ".0%"),
    _column("slo_e2e_attainment", "E2E MET", lambda c, lv: lv.slo_e2e_attainment, ".0%"),
    _column("window", "WINDOW", lambda c, lv: lv.window, "s"),
    _column("window_span", "WINDOW", _window_span, "s"),
    _column("counted_requests", "COUNTED", lambda c, lv: lv.counted_requests, "d"),
    _column("window_start_s", "WINDOW FROM S", lambda c, lv: lv.window_start_s, ".1f"),
    _column("window_end_s", "WINDOW TO S", lambda c, lv: lv.window_end_s, ".1f"),
    # The GPUs while the level ran.
    _column("gpu_util_pct", "GPU %", lambda c, lv: lv.gpu_util_pct, ".0f"),
    _column("gpu_power_w", "POWER W", lambda c, lv: lv.gpu_power_w, ".0f"),
    _column("pcie_rx_bytes_s", "PCIE RX GB/S", lambda c, lv: lv.pcie_rx_bytes_s, ".2f", 1e-9),
    _column("pcie_tx_bytes_s", "PCIE TX GB/S", lambda c, lv: lv.pcie_tx_bytes_s, ".2f", 1e-9),
)
COLUMNS: dict[str, Column] = {column.name: column for column in _TABLE}
CELL_COLUMNS = frozenset({"profile", "cell", "cell_key", "layout", "variant", "status"})

# -- views: which columns each rendering shows -------------------------------------------

SUMMARY_VIEW = (
    "cell",
    "layout",
    "variant",
    "load",
    "verify_tokens_per_step",
    "step_time_s",
    "accepted_tokens_per_step",
    "accept_ratio",
    "output_tok_s",
    "speedup_vs_off",
    "ttft_p50_p99",
    "itl_p50_p99",
    "request_outcome",
)
"""The terminal's and the TUI's run table (DESIGN 1), and `summary.md`'s."""
LATENCY_VIEW = (
    "variant_or_server",
    "load",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "itl_p50_s",
    "itl_p90_s",
    "itl_p99_s",
    "e2e_p50_s",
    "e2e_p99_s",
)
SLO_VIEW = (
    "cell",
    "layout",
    "variant",
    "load",
    "output_tok_s",
    "goodput_tok_s",
    "slo_attainment",
    "slo_ttft_attainment",
    "slo_itl_attainment",
    "slo_e2e_attainment",
    "slo_pass",
    "window_span",
)
"""Each level against the run's SLO: goodput beside throughput, the share that met it (per
target too) and whether that reaches the attainment; the targets it has not are dropped."""
CSV_VIEW = (
    "profile",
    "layout",
    "variant",
    "status",
    "concurrency",
    "rate",
    "requests",
    "errors",
    "duration_s",
    "output_tok_s",
    "goodput_tok_s",
    "goodput_req_s",
    "slo_attainment",
    "slo_pass",
    "window",
    "counted_requests",
    "window_start_s",
    "window_end_s",
    "speedup_vs_off",
    "verify_tokens_per_step",
    "step_time_s",
    "accepted_tokens_per_step",
    "accept_ratio",
    "accept_length_counters",
    "accept_length_per_request",
    "accept_length_gauge",
    "tokens_per_chunk",
    "effective_tok_s",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "itl_p50_s",
    "itl_p90_s",
    "itl_p95_s",
    "itl_p99_s",
    "e2e_p50_s",
    "e2e_p99_s",
    "chunk_gap_p50_s",
    "chunk_gap_p99_s",
    "gpu_util_pct",
    "gpu_power_w",
    "pcie_rx_bytes_s",
    "pcie_tx_bytes_s",
)
COMPARE_METRICS = (
    "output_tok_s",
    "accept_length",
    "step_time_s",
    "ttft_p50_s",
    "ttft_p99_s",
    "itl_p50_s",
    "itl_p99_s",
    "e2e_p50_s",
)
"""What `runs compare` puts side by side (its JSON has all; the table the first five)."""
COMPARE_SHOWN = (
    ("output_tok_s", "TOK/S A / B", None),
    ("accept_length", "ACCEPT A / B", None),
    ("step_time_s", "STEP MS A / B", None),
    ("ttft_p50_s", "TTFT P50 A / B", ".0f"),
    ("itl_p50_s", "ITL P50 A / B", None),
)
"""Compare table columns: (column, header, format when not the column's own)."""


def headers(view: Sequence[str]) -> tuple[str, ...]:
    return tuple(COLUMNS[name].header for name in view)


SUMMARY_HEADERS = headers(SUMMARY_VIEW)
LATENCY_HEADERS = headers(LATENCY_VIEW)
METRIC_NOTE = (
    "ITL: per request, first token excluded (vLLM's TPOT); TTFT to the first chunk with "
    "a token; acceptance from SGLang's counters before/after each level."
)


def view_rows(summary: RunSummary, view: Sequence[str], *, failed_cells: bool) -> list[list[str]]:
    """One row per cell and level; with `failed_cells`, a cell without levels gets a row
    of its own, its status and reason in the last column."""
    columns = [COLUMNS[name] for name in view]
    rows = []
    for cell in summary.cells:
        if not cell.levels and failed_cells:
            blank = LevelSummary(level=-1)
            row = [c.text(cell, blank) if c.per_cell else "-" for c in columns]
            row[-1] = f"{cell.status}: {cell.reason}" if cell.reason else cell.status
            rows.append(row)
        for level in cell.levels:
            rows.append([c.text(cell, level) for c in columns])
    return rows


def summary_rows(summary: RunSummary) -> list[list[str]]:
    """The DESIGN 1 table: per cell and level, verify/step, step time, accepted/step,
    output tok/s, speedup over `off`, latency, request counts."""
    return view_rows(summary, SUMMARY_VIEW, failed_cells=True)


MODELS_LATENCY_VIEW = ("profile", *LATENCY_VIEW)
"""The latency view of a run of several models: its rows name their model."""


def several_models(summary: RunSummary) -> bool:
    return len({cell.profile for cell in summary.cells}) > 1


def latency_view(summary: RunSummary) -> tuple[str, ...]:
    return MODELS_LATENCY_VIEW if several_models(summary) else LATENCY_VIEW


def latency_rows(summary: RunSummary) -> list[list[str]]:
    """Latency percentiles (ms) per cell and level (headers: `latency_headers`)."""
    return view_rows(summary, latency_view(summary), failed_cells=False)


def latency_headers(summary: RunSummary) -> tuple[str, ...]:
    return headers(latency_view(summary))


def best_line(summary: RunSummary) -> str:
    """The best cell per level; with several models in the run, each named with its model
    (the best across models at a level is rarely the question: budget-scaling says each
    model's own best)."""
    several = several_models(summary)
    return "; ".join(
        f"{b.load_label}: "
        + (f"{b.profile} " if several and b.profile else "")
        + f"{b.variant or b.profile or 'the server'} {b.output_tok_s:.1f} tok/s"
        for b in summary.best
    )


ACCEPTANCE_NOTE = (
    "Accepted drafts per verify step (bonus token not counted), share of the level's steps, "
    "from each request's final spec_correct_drafts_histogram; acceptance drops at the first "
    "draft position fewer than half of the steps accepted."
)


def acceptance_lines(summary: RunSummary, max_rows: int = 10) -> list[str]:
    """One line per level whose requests carried an acceptance histogram: where acceptance
    drops and each count's share of the steps (`0:1% 1:8% ...`, long ones binned)."""
    lines = []
    for cell, level in summary.levels():
        histogram = level.correct_drafts_histogram
        if not histogram:
            continue
        name = " ".join(part for part in (cell.name, cell.layout, cell.variant) if part)
        shares = " ".join(f"{row.label}:{row.share:.0%}" for row in histogram_rows(histogram))
        lines.append(
            f"{name}, concurrency {level.load_label}: drop at draft "
            f"{fmt(level.accept_drop_position, 'd')}; {shares}"
        )
    return lines


RANKS_NOTE = (
    "Per DP rank, from the rank each request's meta_info names: requests served, output tok/s "
    "(its tokens over the level's wall time), mean decode speed of one of its requests, "
    "acceptance."
)


def rank_lines(summary: RunSummary) -> list[str]:
    """One line per level of a DP server whose requests named their rank."""
    lines = []
    for cell, level in summary.levels():
        if not level.dp_ranks:
            continue
        name = " ".join(part for part in (cell.name, cell.layout, cell.variant) if part)
        parts = [
            f"dp{r.rank} {r.requests} req, {fmt(r.output_tok_s, '.1f')} tok/s, "
            f"{fmt(r.request_tok_s, '.1f')} tok/s per request"
            + (f", accept {r.accept_length:.2f}" if r.accept_length is not None else "")
            for r in level.dp_ranks
        ]
        lines.append(f"{name}, concurrency {level.load_label}: " + "; ".join(parts))
    return lines


def judged(summary: RunSummary) -> bool:
    """Whether any cell of the run was judged against an SLO."""
    return any(cell.slo for cell in summary.cells)


def slo_view(summary: RunSummary) -> tuple[str, ...]:
    """SLO_VIEW without the per-target columns of targets no level was judged on."""
    levels = [level for _, level in summary.levels()]
    unused = {
        name
        for name in ("slo_ttft_attainment", "slo_itl_attainment", "slo_e2e_attainment")
        if all(COLUMNS[name].get(CellSummary(cell_id=""), lv) is None for lv in levels)
    }
    return tuple(name for name in SLO_VIEW if name not in unused)


def slo_title(summary: RunSummary) -> str:
    """`SLO: TTFT ≤ 200 ms for 95% of requests` (each cell's when they differ)."""
    described = list(dict.fromkeys(cell.slo for cell in summary.cells if cell.slo))
    return "SLO: " + "; ".join(described) if described else ""


def slo_rows(summary: RunSummary) -> list[list[str]]:
    return view_rows(summary, slo_view(summary), failed_cells=False)


def knee_lines(summary: RunSummary) -> list[str]:
    """A line per cell with a knee: `qwen3.6-27b tp1 off: carries 24 concurrent at ...`."""
    lines = []
    for cell in summary.cells:
        if cell.knee is None:
            continue
        name = " ".join(part for part in (cell.name, cell.layout, cell.variant) if part)
        tried = ", ".join(f"{load:g}" for load in cell.knee.loads)
        lines.append(f"{name}: {cell.knee.text()} (loads measured: {tried})")
    return lines


def level_notes(summary: RunSummary) -> list[str]:
    """A line per level with something to say beyond its row: why a rate level fell behind
    (the whole reason), and prompts the server counted at another length than sent."""
    lines = []
    for cell, level in summary.levels():
        name = " ".join(
            part for part in (cell.profile or cell.server, cell.layout, cell.variant) if part
        )
        load = level.label or level.load_label
        where = f"{name + ' ' if name else ''}level {level.level + 1} ({load})"
        for note in (level.behind, prompt_len_note(level)):
            if note:
                lines.append(f"{where}: {note}")
    return lines


def window_line(summary: RunSummary) -> str:
    """What the statistics count: the steady windows, or every request, and how many."""
    levels = [level for _, level in summary.levels() if level.window is not None]
    if not levels:
        return ""
    steady = [lv for lv in levels if lv.window == "steady"]
    counted = sum(lv.counted_requests or 0 for lv in levels)
    finished = sum(lv.requests for lv in levels)
    if not steady:
        notes = {lv.window_note or "" for lv in levels}
        why = levels[0].window_note or "every request"
        if len(notes) > 1 and all(note.startswith("too short") for note in notes):
            why = (
                "no level was long enough for a steady state (one needs more than "
                "2 x its concurrency + 3 requests)"
            )
        return f"Statistics count every request ({finished}): {why}."
    return (
        f"Statistics count each closed-loop level's steady window, from its first completion "
        f"to its last send ({len(steady)} of {len(levels)} levels; {counted} of {finished} "
        "requests): ramp-up and drain are left out (--include-transients keeps them)."
    )


def workload_line(summary: RunSummary) -> str:
    """What the run sent: `workload multi-turn`, `prompts from FILE`, or `random ids, 512 in
    / 256 out`, and its endpoint when not the native one; empty for a run that does not say
    (an imported one)."""
    record = summary.workload or {}
    if not record:
        return ""
    name, dataset = record.get("workload"), record.get("dataset")
    if name:
        text = f"workload {name}"
        speed = record.get("replay_speed")
        if isinstance(speed, int | float) and speed != 1:
            text += f" at {speed:g}x"
    elif dataset:
        text = f"prompts from {dataset}, up to {record.get('output_len')} out"
    else:
        text = f"random ids, {record.get('input_len')} in / {record.get('output_len')} out"
        ratio = record.get("range_ratio")
        if isinstance(ratio, int | float) and ratio < 1:
            text += f" (lengths from {ratio:g}x)"
    endpoint = record.get("endpoint")
    if endpoint and endpoint != "generate":
        text += f"; endpoint {endpoint}"
    return f"Sent: {text}."


def to_csv(summary: RunSummary) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_VIEW)
    columns = [COLUMNS[name] for name in CSV_VIEW]
    for cell, level in summary.levels():
        writer.writerow([column.csv(cell, level) for column in columns])
    return out.getvalue()


@dataclass(frozen=True)
class SideBySide:
    """One budget-scaling finding as a table: a column per model, a row per budget."""

    title: str
    headers: tuple[str, ...]
    rows: list[list[str]]


def scaling_tables(summary: RunSummary) -> list[SideBySide]:
    """Each budget-scaling finding's models side by side: accepted tokens per step at each
    budget, the trend, and the model's best variant with its tok/s and speedup."""
    from console.bench.scaling import BudgetScaling

    tables = []
    for finding in summary.findings:
        if not isinstance(finding, BudgetScaling):
            continue
        models = finding.models
        budgets = sorted({b for m in models for b in m.budgets})
        rows = [
            [
                f"budget {budget}",
                *(
                    f"{m.accept_lengths[m.budgets.index(budget)]:.1f}"
                    if budget in m.budgets
                    else "-"
                    for m in models
                ),
            ]
            for budget in budgets
        ]
        rows.append(["acceptance", *(m.trend for m in models)])
        rows.append(["best variant", *(m.best_variant or "-" for m in models)])
        rows.append(
            [
                "best tok/s",
                *(
                    "-"
                    if m.best_tok_s is None
                    else f"{m.best_tok_s:.0f}"
                    + ("" if m.best_speedup is None else f" ({m.best_speedup:.1f}x)")
                    for m in models
                ),
            ]
        )
        headers = (
            "",
            *(f"{m.profile} {m.layout} ({m.architecture or '?'})" for m in models),
        )
        title = (
            f"budget scaling at concurrency {finding.concurrency} (accepted tokens per verify step)"
        )
        tables.append(SideBySide(title, headers, rows))
    return tables


def to_markdown(summary: RunSummary) -> str:
    lines = [f"# Run {summary.run_id}", ""]
    lines.append(
        f"{summary.name} ({summary.kind}, {summary.status}); "
        f"host {summary.host or '?'}, GPUs {summary.gpu_names or '?'}, driver "
        f"{summary.driver or '?'}"
        + (f"; simulator time x{summary.time_scale:g}" if summary.time_scale != 1 else "")
    )
    sent = workload_line(summary)
    if sent:
        lines += ["", sent]
    lines += [
        "",
        "| " + " | ".join(SUMMARY_HEADERS) + " |",
        "|" + " --- |" * len(SUMMARY_HEADERS),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in summary_rows(summary)]
    lines += [
        "",
        "ITL is per request, excluding the first token: (last token - first token) / "
        "(output tokens - 1), i.e. vLLM's TPOT. Acceptance is tokens committed per verify "
        "step (bonus included) from SGLang's counters before and after each level.",
    ]
    window = window_line(summary)
    if window:
        lines += ["", window]
    notes = level_notes(summary)
    if notes:
        lines += [""] + [f"- {line}" for line in notes]
    if judged(summary):
        view = slo_view(summary)
        lines += ["", f"## {slo_title(summary)}", ""]
        lines += ["| " + " | ".join(headers(view)) + " |", "|" + " --- |" * len(view)]
        lines += ["| " + " | ".join(row) + " |" for row in slo_rows(summary)]
        knees = knee_lines(summary)
        if knees:
            lines += [""] + [f"- {line}" for line in knees]
    for side in scaling_tables(summary):
        lines += ["", f"## {side.title[0].upper()}{side.title[1:]}", ""]
        lines += ["| " + " | ".join(side.headers) + " |", "|" + " --- |" * len(side.headers)]
        lines += ["| " + " | ".join(row) + " |" for row in side.rows]
    if summary.findings:
        lines += ["", "## Findings", ""]
        lines += [f"- **{f.kind}**: {f.message}" for f in summary.findings]
    acceptance = acceptance_lines(summary)
    if acceptance:
        lines += ["", "## Acceptance distribution", "", ACCEPTANCE_NOTE, ""]
        lines += [f"- {line}" for line in acceptance]
    ranks = rank_lines(summary)
    if ranks:
        lines += ["", "## Per DP rank", "", RANKS_NOTE, ""]
        lines += [f"- {line}" for line in ranks]
    if summary.best:
        lines += ["", "## Best per level", ""]
        lines += [
            f"- {'rate' if b.rate is not None else 'concurrency'} {b.load_label}: "
            + (f"{b.profile} {b.layout} {b.variant}" if b.profile else "the server")
            + f" at {b.output_tok_s:.1f} tok/s"
            for b in summary.best
        ]
    return "\n".join(lines) + "\n"
