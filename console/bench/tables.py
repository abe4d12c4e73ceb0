"""Run summaries and comparisons as rows of text: one layout for the CLI and the TUI."""

from __future__ import annotations

from typing import Any

SUMMARY_HEADERS = (
    "PROFILE",
    "LAYOUT",
    "VARIANT",
    "CONC",
    "VERIFY/STEP",
    "STEP MS",
    "ACCEPT/STEP",
    "TOK/S",
    "SPEEDUP",
    "TTFT P50/P99",
    "ITL P50/P99",
    "REQUESTS",
)
LATENCY_HEADERS = (
    "VARIANT",
    "CONC",
    "TTFT P50",
    "TTFT P90",
    "TTFT P99",
    "ITL P50",
    "ITL P90",
    "ITL P99",
    "E2E P50",
    "E2E P99",
)
COMPARE_HEADERS = (
    "CELL",
    "CONC",
    "TOK/S A / B",
    "ACCEPT A / B",
    "STEP MS A / B",
    "TTFT P50 A / B",
    "ITL P50 A / B",
)
METRIC_NOTE = (
    "ITL: per request, first token excluded (vLLM's TPOT); TTFT to the first chunk with "
    "a token; acceptance from SGLang's counters before/after each level."
)


def fmt(value: Any, spec: str, scale: float = 1.0) -> str:
    if value is None:
        return "-"
    return f"{value if scale == 1.0 else value * scale:{spec}}"


def level_label(level: dict[str, Any]) -> str:
    return str(level["concurrency"]) if level.get("rate") is None else f"{level['rate']:g}/s"


def summary_rows(summary: dict[str, Any]) -> list[list[str]]:
    """The DESIGN 1 table: per cell and level, verify/step, step time, accepted/step,
    output tok/s, speedup over `off`, latency, request counts."""
    rows = []
    for cell in summary["cells"]:
        name = cell["profile"] or cell["server"] or "-"
        if not cell["levels"]:
            rows.append(
                [name, cell["layout"] or "-", cell["variant"] or "-"]
                + ["-"] * 8
                + [f"{cell['status']}: {cell.get('reason') or ''}"]
            )
        for level in cell["levels"]:
            speedup = level.get("speedup_vs_off")
            rows.append(
                [
                    name,
                    cell["layout"] or "-",
                    cell["variant"] or "-",
                    level_label(level),
                    fmt(level.get("verify_tokens_per_step"), "d"),
                    fmt(level.get("step_time_s"), ".1f", 1000),
                    fmt(level.get("accepted_tokens_per_step"), ".2f"),
                    fmt(level.get("output_tok_s"), ".1f"),
                    fmt(speedup, ".2f") + ("x" if speedup else ""),
                    f"{fmt(level.get('ttft_p50_s'), '.0f', 1000)}/"
                    f"{fmt(level.get('ttft_p99_s'), '.0f', 1000)}",
                    f"{fmt(level.get('itl_p50_s'), '.1f', 1000)}/"
                    f"{fmt(level.get('itl_p99_s'), '.1f', 1000)}",
                    f"{level['requests']} ok"
                    + (f", {level['errors']} err" if level["errors"] else ""),
                ]
            )
    return rows


def latency_rows(summary: dict[str, Any]) -> list[list[str]]:
    """Latency percentiles (ms) per cell and level."""
    rows = []
    for cell in summary["cells"]:
        for level in cell["levels"]:
            rows.append(
                [cell["variant"] or cell["server"] or "-", level_label(level)]
                + [
                    fmt(level.get(f"{metric}_{p}_s"), ".1f", 1000)
                    for metric, p in (
                        ("ttft", "p50"),
                        ("ttft", "p90"),
                        ("ttft", "p99"),
                        ("itl", "p50"),
                        ("itl", "p90"),
                        ("itl", "p99"),
                        ("e2e", "p50"),
                        ("e2e", "p99"),
                    )
                ]
            )
    return rows


def best_line(summary: dict[str, Any]) -> str:
    return "; ".join(
        f"{b['concurrency'] or b['rate']}: {b['variant'] or b['profile']} "
        f"{b['output_tok_s']:.1f} tok/s"
        for b in summary["best"]
    )


def compare_rows(result: dict[str, Any]) -> list[list[str]]:
    rows = []
    for row in result["rows"]:

        def pair(key: str, spec: str, scale: float = 1.0, row: dict[str, Any] = row) -> str:
            delta = row.get(f"{key}_delta_pct")
            tail = f" ({delta:+.0f}%)" if delta is not None else ""
            return (
                f"{fmt(row.get(key + '_a'), spec, scale)} / "
                f"{fmt(row.get(key + '_b'), spec, scale)}{tail}"
            )

        rows.append(
            [
                str(row["cell"]),
                str(row["concurrency"]),
                pair("output_tok_s", ".1f"),
                pair("accept_length", ".2f"),
                pair("step_time_s", ".1f", 1000),
                pair("ttft_p50_s", ".0f", 1000),
                pair("itl_p50_s", ".1f", 1000),
            ]
        )
    return rows
