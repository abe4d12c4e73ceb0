"""Import SGLang's own benchmark results (`bench_serving --output-file` JSONL) as a run.

Its definitions differ from ours in two places, kept visible in the imported run: its
"accept length" is the server's lifetime average from /server_info (DP rank 0), and its
ITL splits chunk gaps over tokens; its TPOT is our per-request ITL.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

from console.bench.cells import meta_from_server_info
from console.bench.results import CellMeta, JsonObject, LevelSummary, Stats
from console.bench.rundir import RunDir
from console.bench.runmeta import RunMeta
from console.core.errors import UsageError


def _number(row: JsonObject, key: str) -> float | None:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _count(row: JsonObject, key: str) -> int | None:
    value = row.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ms(row: JsonObject, key: str) -> float | None:
    value = _number(row, key)
    return None if value is None else value / 1000.0


def _stats(row: JsonObject, name: str) -> Stats:
    """bench_serving's `mean_/median_/p90_/p95_/p99_{name}_ms` (sglang 0.5.23
    benchmark/serving.py:1880-1903), in seconds; it reports no min, max or count."""
    return Stats(
        p50=_ms(row, f"median_{name}_ms"),
        p90=_ms(row, f"p90_{name}_ms"),
        p95=_ms(row, f"p95_{name}_ms"),
        p99=_ms(row, f"p99_{name}_ms"),
        mean=_ms(row, f"mean_{name}_ms"),
    )


def _level(index: int, row: JsonObject) -> LevelSummary:
    concurrency = row.get("max_concurrency")
    rate = row.get("request_rate")
    return LevelSummary(
        level=index,
        label=f"concurrency {concurrency}" if concurrency else f"rate {rate}",
        concurrency=concurrency if isinstance(concurrency, int) else None,
        rate=float(rate) if isinstance(rate, int | float) and math.isfinite(rate) else None,
        status="done",
        requests=_count(row, "completed") or 0,
        errors=0,
        duration_s=_number(row, "duration"),
        output_tokens=_count(row, "total_output_tokens"),
        output_tok_s=_number(row, "output_throughput"),
        request_s=_number(row, "request_throughput"),
        accept_length=_number(row, "accept_length"),
        accept_length_note="server lifetime average (SGLang bench), not per level",
        ttft=_stats(row, "ttft"),
        # Its TPOT is our per-request ITL; its ITL, chunk gaps split over their tokens.
        itl=_stats(row, "tpot"),
        e2e=_stats(row, "e2e_latency"),
        chunk_gap=_stats(row, "itl"),
        step_time_s=None,
    )


MAX_LINE_BYTES = 64 * 1024 * 1024
"""One bench_serving result line: its /server_info and, with --output-details, every
request's lengths and latencies; far below this."""
MAX_FILE_BYTES = 512 * 1024 * 1024
MAX_ROWS = 100_000


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(number, line) for each non-blank line, read streaming with caps: a huge or endless
    file (`/dev/zero`) fails at the cap with its memory flat."""
    total = 0
    try:
        with path.open("rb") as handle:
            number = 0
            while True:
                line = handle.readline(MAX_LINE_BYTES + 1)
                if not line:
                    return
                number += 1
                total += len(line)
                if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                    raise UsageError(
                        f"{path}: line {number} is longer than {MAX_LINE_BYTES // 2**20} MiB "
                        "(not a bench_serving result file)"
                    )
                if total > MAX_FILE_BYTES:
                    raise UsageError(
                        f"{path}: more than {MAX_FILE_BYTES // 2**20} MiB "
                        "(not a bench_serving result file)"
                    )
                if line.strip():
                    yield number, line
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None


def import_sglang_jsonl(path: Path, root: Path, name: str | None) -> RunDir:
    rows: list[JsonObject] = []
    for number, line in _lines(path):
        try:
            # bench_serving writes a bare `Infinity` for an unbounded request rate.
            row = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError):
            raise UsageError(f"{path}: line {number} is not JSON") from None
        if not isinstance(row, dict) or "output_throughput" not in row:
            raise UsageError(
                f"{path}: line {number} is not a bench_serving result (no output_throughput)"
            )
        rows.append(row)
        if len(rows) > MAX_ROWS:
            raise UsageError(f"{path}: more than {MAX_ROWS} results")
    if not rows:
        raise UsageError(f"{path}: no results")
    backend = str(rows[0].get("backend", "sglang"))
    info = rows[0].get("server_info") if isinstance(rows[0].get("server_info"), dict) else {}
    model = (info or {}).get("served_model_name") or (info or {}).get("model_path") or "server"
    cell = CellMeta(
        cell_id=f"sglang-bench/{backend}",
        server_id=f"{model} ({backend})",
        status="done",
        # bench_serving stores the whole /server_info (sglang 0.5.23 benchmark/serving.py:
        # 1847-1867), where a real server always has `speculative_algorithm`, null when off;
        # a missing key or a missing /server_info leaves the algorithm unknown, not "off".
        algorithm=meta_from_server_info(info).algorithm,
    )
    return RunDir.create(
        root,
        name or f"sglang-bench-{path.stem}",
        RunMeta(
            kind="sglang-bench",
            status="done",
            source_file=str(path.resolve()),
            cells=(cell,),
            imported_levels=tuple(_level(i, row) for i, row in enumerate(rows)),
            fingerprint={"host": None, "imported": True},
        ),
    )
