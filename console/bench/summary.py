"""Level and run summaries computed from a run's files (findings come from `findings.py`).

Every number is derived from `levels.jsonl`, `requests.jsonl` and `telemetry.jsonl`, so a
summary can be rebuilt at any time (after a crash, on `--resume`, for `runs show`).
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from typing import Any

from console.bench.findings import CellFacts, find_all
from console.bench.rundir import RunDir
from console.bench.stats import describe, mean


def verify_tokens_per_step(cell: dict[str, Any]) -> int | None:
    """Tokens the target verifies per step: 1 autoregressive, budget + 1 for DDTree, the
    draft block for chains."""
    algorithm = (cell.get("algorithm") or "off").upper()
    if algorithm in ("OFF", "NONE", ""):
        return 1
    if algorithm == "DDTREE" and cell.get("ddtree_budget"):
        return int(cell["ddtree_budget"]) + 1
    info = cell.get("server_info") or {}
    drafts = info.get("speculative_num_draft_tokens") or cell.get("num_draft_tokens")
    return int(drafts) if drafts else None


def _delta(before: dict[str, Any], after: dict[str, Any], key: str) -> float | None:
    a, b = before.get(key), after.get(key)
    if a is None or b is None or b < a:
        return None
    return float(b - a)


def summarize_level(
    level: dict[str, Any],
    requests: list[dict[str, Any]],
    cell: dict[str, Any],
    telemetry: list[dict[str, Any]],
) -> dict[str, Any]:
    scale = float(level.get("time_scale") or 1.0)
    ok = [r for r in requests if not r.get("error")]
    errors: dict[str, int] = defaultdict(int)
    for request in requests:
        if request.get("error"):
            errors[str(request["error"])] += 1
    duration = float(level.get("wall_s") or 0.0) * scale
    output_tokens = sum(int(r.get("output_tokens") or 0) for r in ok)
    gaps = [g / 1e6 for r in ok for g in r.get("chunk_gaps_us") or ()]
    before = level.get("counters_before") or {}
    after = level.get("counters_after") or {}
    verify_delta = _delta(before, after, "spec_verify_calls")
    generation_delta = _delta(before, after, "generation_tokens")
    accept_counters = (
        generation_delta / verify_delta if verify_delta and generation_delta is not None else None
    )
    per_request_accept = mean([r.get("accept_length") for r in ok])
    steps = []
    for r in ok:
        count = r.get("spec_verify_ct") or ((r.get("output_tokens") or 0) - 1)
        if count and r.get("e2e_s") is not None and r.get("ttft_s") is not None:
            steps.append((r["e2e_s"] - r["ttft_s"]) / count)
    step_time = mean(steps)
    accept = accept_counters if accept_counters is not None else per_request_accept
    algorithm = cell.get("algorithm")
    if algorithm is None:
        # Unknown (a --url server whose /server_info did not say): measured acceptance wins.
        speculative = accept is not None
    else:
        speculative = str(algorithm).upper() not in ("OFF", "NONE", "")
    accepted_per_step = accept if speculative else 1.0
    tokens_per_chunk = mean([r.get("tokens_per_chunk") for r in ok])
    summary: dict[str, Any] = {
        "level": level.get("level"),
        "label": level.get("label"),
        "concurrency": level.get("concurrency"),
        "rate": level.get("rate"),
        "status": level.get("status", "done"),
        "requests": len(ok),
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
        "duration_s": duration,
        "output_tokens": output_tokens,
        "output_tok_s": output_tokens / duration if duration > 0 else None,
        "request_s": len(ok) / duration if duration > 0 else None,
        "accept_length": accepted_per_step if speculative else None,
        "accept_length_counters": accept_counters,
        "accept_length_per_request": per_request_accept,
        "accept_length_gauge": after.get("accept_length_gauge"),
        "tokens_per_chunk": tokens_per_chunk,
        "verify_tokens_per_step": verify_tokens_per_step(cell),
        "accepted_tokens_per_step": accepted_per_step,
        "step_time_s": step_time,
        "effective_tok_s": (
            accepted_per_step / step_time if step_time and accepted_per_step else None
        ),
    }
    if speculative and tokens_per_chunk and accept:
        summary["chunk_accept_mismatch"] = abs(tokens_per_chunk - accept) / accept
    summary.update(describe([r.get("ttft_s") for r in ok], "ttft"))
    summary.update(describe([r.get("itl_s") for r in ok], "itl"))
    summary.update(describe([r.get("e2e_s") for r in ok], "e2e"))
    summary.update(describe(gaps, "chunk_gap"))
    summary.update(_telemetry_averages(telemetry, level, cell))
    return summary


def _telemetry_averages(
    telemetry: list[dict[str, Any]], level: dict[str, Any], cell: dict[str, Any]
) -> dict[str, Any]:
    start, end = level.get("started_wall"), level.get("ended_wall")
    gpus = set(cell.get("gpus") or [])
    picked = [
        t
        for t in telemetry
        if t.get("kind") == "gpu"
        and start is not None
        and end is not None
        and start <= t.get("t_wall", 0) <= end
        and (not gpus or t.get("index") in gpus)
    ]
    return {
        "gpu_util_pct": mean([t.get("util_pct") for t in picked]),
        "gpu_power_w": mean([t.get("power_w") for t in picked]),
        "pcie_rx_bytes_s": mean([t.get("pcie_rx_bytes_s") for t in picked]),
        "pcie_tx_bytes_s": mean([t.get("pcie_tx_bytes_s") for t in picked]),
        "gpu_samples": len(picked),
    }


def summarize_run(run: RunDir) -> dict[str, Any]:
    meta = run.meta()
    levels = run.read_jsonl("levels.jsonl")
    requests = run.read_jsonl("requests.jsonl")
    telemetry = run.read_jsonl("telemetry.jsonl")
    by_level: dict[tuple[str, int, int], list[dict[str, Any]]] = defaultdict(list)
    for request in requests:
        by_level[
            (
                str(request.get("cell")),
                int(request.get("level", -1)),
                int(request.get("attempt", 1)),
            )
        ].append(request)
    cells_out = []
    for cell in meta.get("cells", []):
        cell_levels = sorted(
            (lv for lv in levels if lv.get("cell") == cell["cell_id"]),
            key=lambda lv: int(lv.get("level", 0)),
        )
        # A level run again after --resume supersedes the earlier attempt.
        latest: dict[int, dict[str, Any]] = {}
        for level in cell_levels:
            latest[int(level["level"])] = level
        if meta.get("kind") == "sglang-bench":
            summaries = [dict(level) for level in meta.get("imported_levels", [])]
        else:
            summaries = [
                summarize_level(
                    level,
                    by_level[(cell["cell_id"], index, int(level.get("attempt", 1)))],
                    cell,
                    telemetry,
                )
                for index, level in sorted(latest.items())
            ]
        cells_out.append(
            {
                "cell_id": cell["cell_id"],
                "profile": cell.get("profile"),
                "layout": cell.get("layout"),
                "variant": cell.get("variant"),
                "algorithm": cell.get("algorithm"),
                "architecture": cell.get("architecture"),
                "ddtree_budget": cell.get("ddtree_budget"),
                "server": cell.get("server_id") or cell.get("url"),
                "status": cell.get("status", "pending"),
                "reason": cell.get("reason"),
                "levels": summaries,
            }
        )
    _speedups(cells_out)
    status = meta.get("status", "unknown")
    if status == "running" and run.owner_alive() is None:
        status = "interrupted"
    return {
        "schema_version": 1,
        "run_id": run.run_id,
        "run_dir": str(run.path),
        "name": meta.get("name"),
        "kind": meta.get("kind"),
        "status": status,
        "created_wall": meta.get("created_wall"),
        "fingerprint": meta.get("fingerprint", {}),
        "time_scale": meta.get("time_scale", 1.0),
        "workload": meta.get("workload"),
        "cells": cells_out,
        "best": best_per_level(cells_out),
        "findings": [f.to_json() for f in find_all([CellFacts.from_json(c) for c in cells_out])],
    }


def _speedups(cells: list[dict[str, Any]]) -> None:
    baseline: dict[tuple[Any, ...], float] = {}
    for cell in cells:
        if (cell.get("algorithm") or "off").upper() in ("OFF", "NONE"):
            for level in cell["levels"]:
                if level.get("output_tok_s"):
                    baseline[
                        (cell["profile"], cell["layout"], level["concurrency"], level["rate"])
                    ] = level["output_tok_s"]
    for cell in cells:
        for level in cell["levels"]:
            base = baseline.get(
                (cell["profile"], cell["layout"], level["concurrency"], level["rate"])
            )
            level["speedup_vs_off"] = (
                level["output_tok_s"] / base if base and level.get("output_tok_s") else None
            )


def best_per_level(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    best: dict[tuple[Any, Any], dict[str, Any]] = {}
    for cell in cells:
        for level in cell["levels"]:
            tok_s = level.get("output_tok_s")
            if tok_s is None or level.get("requests", 0) == 0:
                continue
            key = (level["concurrency"], level["rate"])
            if key not in best or tok_s > best[key]["output_tok_s"]:
                best[key] = {
                    "concurrency": level["concurrency"],
                    "rate": level["rate"],
                    "profile": cell["profile"],
                    "layout": cell["layout"],
                    "variant": cell["variant"],
                    "output_tok_s": tok_s,
                }
    return [best[k] for k in sorted(best, key=lambda k: (k[0] or 0, k[1] or 0))]


CSV_COLUMNS = (
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
    "speedup_vs_off",
    "verify_tokens_per_step",
    "step_time_s",
    "accepted_tokens_per_step",
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


def to_csv(summary: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for cell in summary["cells"]:
        for level in cell["levels"]:
            row = []
            for column in CSV_COLUMNS:
                value = (
                    cell.get(column)
                    if column in ("profile", "layout", "variant", "status")
                    else level.get(column)
                )
                row.append(
                    "" if value is None else (f"{value:.6g}" if isinstance(value, float) else value)
                )
            writer.writerow(row)
    return out.getvalue()


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def _num(value: Any, spec: str = ".1f") -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:{spec}}"
    )


def to_markdown(summary: dict[str, Any]) -> str:
    lines = [f"# Run {summary['run_id']}", ""]
    fp = summary.get("fingerprint") or {}
    lines.append(
        f"{summary.get('name')} ({summary.get('kind')}, {summary.get('status')}); "
        f"host {fp.get('host', '?')}, GPUs {fp.get('gpu_names') or '?'}, driver "
        f"{fp.get('driver') or '?'}"
        + (
            f"; simulator time x{summary['time_scale']:g}"
            if summary.get("time_scale", 1) != 1
            else ""
        )
    )
    lines += [
        "",
        "| profile | layout | variant | conc | verify tok/step | step ms | "
        "accepted/step | output tok/s | speedup | TTFT p50/p99 ms | ITL p50/p99 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for cell in summary["cells"]:
        if not cell["levels"]:
            lines.append(
                f"| {cell['profile']} | {cell['layout']} | {cell['variant']} | - | - "
                f"| - | - | - | - | {cell['status']}: {cell.get('reason') or ''} | |"
            )
        for level in cell["levels"]:
            lines.append(
                f"| {cell['profile']} | {cell['layout']} | {cell['variant']} | "
                f"{level['concurrency'] or level['rate']} | "
                f"{_num(level.get('verify_tokens_per_step'), 'd')} | "
                f"{_ms(level.get('step_time_s'))} | "
                f"{_num(level.get('accepted_tokens_per_step'), '.2f')} | "
                f"{_num(level.get('output_tok_s'))} | "
                f"{_num(level.get('speedup_vs_off'), '.2f')}x | "
                f"{_ms(level.get('ttft_p50_s'))}/{_ms(level.get('ttft_p99_s'))} | "
                f"{_ms(level.get('itl_p50_s'))}/{_ms(level.get('itl_p99_s'))} |"
            )
    lines += [
        "",
        "ITL is per request, excluding the first token: (last token - first token) / "
        "(output tokens - 1), i.e. vLLM's TPOT. Acceptance is tokens committed per verify "
        "step (bonus included) from SGLang's counters before and after each level.",
    ]
    if summary["findings"]:
        lines += ["", "## Findings", ""]
        lines += [f"- **{f['kind']}**: {f['message']}" for f in summary["findings"]]
    if summary["best"]:
        lines += ["", "## Best per level", ""]
        lines += [
            f"- concurrency {b['concurrency'] or b['rate']}: {b['profile']} {b['layout']} "
            f"{b['variant']} at {b['output_tok_s']:.1f} tok/s"
            for b in summary["best"]
        ]
    return "\n".join(lines) + "\n"


def write_summaries(run: RunDir) -> dict[str, Any]:
    summary = summarize_run(run)
    import json

    run.write_text("summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    run.write_text("summary.csv", to_csv(summary))
    run.write_text("summary.md", to_markdown(summary))
    return summary
