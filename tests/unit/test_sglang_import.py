"""An imported bench_serving result names the algorithm its /server_info gave: a real server
always has `speculative_algorithm` (null when off), so a result without the key, or without
/server_info at all, leaves the algorithm unknown rather than calling it autoregressive
(sglang 0.5.23 benchmark/serving.py:1847-1867 stores /server_info as fetched, or None)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console.bench.sglang_import import import_sglang_jsonl

ROW = {"backend": "sglang", "max_concurrency": 1, "output_throughput": 10.0, "completed": 1}


@pytest.mark.parametrize(
    ("server_info", "algorithm"),
    [
        ({"speculative_algorithm": "EAGLE"}, "EAGLE"),
        ({"speculative_algorithm": None}, "off"),
        ({"served_model_name": "m"}, None),
        (None, None),
    ],
)
def test_absent_speculative_algorithm_is_unknown(
    tmp_path: Path, server_info: dict[str, Any] | None, algorithm: str | None
) -> None:
    source = tmp_path / "bench.jsonl"
    source.write_text(json.dumps({**ROW, "server_info": server_info}) + "\n")
    run = import_sglang_jsonl(source, tmp_path / "runs", "imported")
    assert run.meta().cells[0].algorithm == algorithm
