"""Two runs side by side: cells matched by profile x layout x variant and level."""

from __future__ import annotations

from typing import Any

METRICS = (
    "output_tok_s",
    "accept_length",
    "step_time_s",
    "ttft_p50_s",
    "ttft_p99_s",
    "itl_p50_s",
    "itl_p99_s",
    "e2e_p50_s",
)


def _key(cell: dict[str, Any]) -> str:
    if cell.get("profile"):
        return f"{cell['profile']}/{cell['layout']}/{cell['variant']}"
    return str(cell.get("server") or cell.get("cell_id"))


def _levels(summary: dict[str, Any]) -> dict[tuple[str, Any], dict[str, Any]]:
    out = {}
    for cell in summary["cells"]:
        for level in cell["levels"]:
            out[(_key(cell), level.get("concurrency") or level.get("rate"))] = level
    return out


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    left, right = _levels(a), _levels(b)
    rows = []
    for key in sorted(set(left) & set(right), key=lambda k: (k[0], k[1] or 0)):
        row: dict[str, Any] = {"cell": key[0], "concurrency": key[1]}
        for metric in METRICS:
            va, vb = left[key].get(metric), right[key].get(metric)
            row[f"{metric}_a"] = va
            row[f"{metric}_b"] = vb
            row[f"{metric}_delta_pct"] = (
                100.0 * (vb - va) / va
                if isinstance(va, int | float) and va and isinstance(vb, int | float)
                else None
            )
        rows.append(row)
    return {
        "run_a": a["run_id"],
        "run_b": b["run_id"],
        "rows": rows,
        "only_a": [f"{k[0]} @ {k[1]}" for k in sorted(set(left) - set(right), key=str)],
        "only_b": [f"{k[0]} @ {k[1]}" for k in sorted(set(right) - set(left), key=str)],
    }
