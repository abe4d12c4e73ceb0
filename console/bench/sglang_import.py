"""Import SGLang's own benchmark results (`bench_serving --output-file` JSONL) as a run.

Its definitions differ from ours in two places, kept visible in the imported run: its
"accept length" is the server's lifetime average from /server_info (DP rank 0), and its
ITL splits chunk gaps over tokens; its TPOT is our per-request ITL.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from console.bench.cells import meta_from_server_info
from console.bench.rundir import RunDir
from console.core.errors import UsageError


def _ms(row: dict[str, Any], key: str) -> float | None:
    value = row.get(key)
    return value / 1000.0 if isinstance(value, int | float) and math.isfinite(value) else None


def _level(index: int, row: dict[str, Any]) -> dict[str, Any]:
    concurrency = row.get("max_concurrency")
    rate = row.get("request_rate")
    return {
        "level": index,
        "label": f"concurrency {concurrency}" if concurrency else f"rate {rate}",
        "concurrency": concurrency,
        "rate": rate if isinstance(rate, int | float) and math.isfinite(rate) else None,
        "status": "done",
        "requests": row.get("completed"),
        "errors": 0,
        "error_kinds": {},
        "duration_s": row.get("duration"),
        "output_tokens": row.get("total_output_tokens"),
        "output_tok_s": row.get("output_throughput"),
        "request_s": row.get("request_throughput"),
        "accept_length": row.get("accept_length"),
        "accept_length_note": "server lifetime average (SGLang bench), not per level",
        "ttft_p50_s": _ms(row, "median_ttft_ms"),
        "ttft_p90_s": _ms(row, "p90_ttft_ms"),
        "ttft_p99_s": _ms(row, "p99_ttft_ms"),
        "ttft_mean_s": _ms(row, "mean_ttft_ms"),
        "itl_p50_s": _ms(row, "median_tpot_ms"),
        "itl_p90_s": _ms(row, "p90_tpot_ms"),
        "itl_p99_s": _ms(row, "p99_tpot_ms"),
        "itl_mean_s": _ms(row, "mean_tpot_ms"),
        "chunk_gap_p50_s": _ms(row, "median_itl_ms"),
        "chunk_gap_p99_s": _ms(row, "p99_itl_ms"),
        "e2e_p50_s": _ms(row, "median_e2e_latency_ms"),
        "e2e_p99_s": _ms(row, "p99_e2e_latency_ms"),
        "step_time_s": None,
    }


def import_sglang_jsonl(path: Path, root: Path, name: str | None) -> RunDir:
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    rows = []
    for number, line in enumerate(lines, start=1):
        try:
            # bench_serving writes a bare `Infinity` for an unbounded request rate.
            row = json.loads(line)
        except ValueError:
            raise UsageError(f"{path}: line {number} is not JSON") from None
        if not isinstance(row, dict) or "output_throughput" not in row:
            raise UsageError(
                f"{path}: line {number} is not a bench_serving result (no output_throughput)"
            )
        rows.append(row)
    if not rows:
        raise UsageError(f"{path}: no results")
    backend = str(rows[0].get("backend", "sglang"))
    info = rows[0].get("server_info") if isinstance(rows[0].get("server_info"), dict) else {}
    model = (info or {}).get("served_model_name") or (info or {}).get("model_path") or "server"
    cell = {
        "cell_id": f"sglang-bench/{backend}",
        "profile": None,
        "layout": None,
        "variant": None,
        "server_id": f"{model} ({backend})",
        "status": "done",
        # bench_serving stores the whole /server_info (sglang 0.5.23 benchmark/serving.py:
        # 1847-1867), where a real server always has `speculative_algorithm`, null when off;
        # a missing key or a missing /server_info leaves the algorithm unknown, not "off".
        "algorithm": meta_from_server_info(info).get("algorithm"),
    }
    return RunDir.create(
        root,
        name or f"sglang-bench-{path.stem}",
        {
            "kind": "sglang-bench",
            "status": "done",
            "source_file": str(path.resolve()),
            "cells": [cell],
            "imported_levels": [_level(i, row) for i, row in enumerate(rows)],
            "fingerprint": {"host": None, "imported": True},
        },
    )
