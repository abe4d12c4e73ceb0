"""A cell whose algorithm is unknown (a --url server whose /server_info did not name one)
shows the acceptance it measured; one known to be autoregressive shows none."""

from __future__ import annotations

from typing import Any

import pytest

from console.bench.summary import summarize_level

LEVEL = {
    "level": 0,
    "wall_s": 2.0,
    "counters_before": {"spec_verify_calls": 100.0, "generation_tokens": 300.0},
    "counters_after": {"spec_verify_calls": 150.0, "generation_tokens": 500.0},
}
REQUESTS = [{"output_tokens": 200, "ttft_s": 0.1, "e2e_s": 2.0, "spec_verify_ct": 50}]


@pytest.mark.parametrize(
    ("cell", "accept"),
    [({}, 4.0), ({"algorithm": "EAGLE"}, 4.0), ({"algorithm": "off"}, None)],
)
def test_unknown_algorithm_keeps_measured_acceptance(cell: dict[str, Any], accept: float | None):
    summary = summarize_level(LEVEL, REQUESTS, cell, [])
    assert summary["accept_length"] == accept
