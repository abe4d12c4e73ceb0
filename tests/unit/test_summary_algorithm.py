"""A cell whose algorithm is unknown (a --url server whose /server_info did not name one)
shows the acceptance it measured; one known to be autoregressive shows none."""

from __future__ import annotations

import pytest

from console.bench.results import CellMeta, Counters, LevelRecord, RequestResult
from console.bench.summary import summarize_level

LEVEL = LevelRecord(
    cell="c",
    level=0,
    wall_s=2.0,
    counters_before=Counters(spec_verify_calls=100.0, generation_tokens=300.0),
    counters_after=Counters(spec_verify_calls=150.0, generation_tokens=500.0),
)
REQUESTS = [
    RequestResult(send_wall=0.0, output_tokens=200, ttft_s=0.1, e2e_s=2.0, spec_verify_ct=50)
]


@pytest.mark.parametrize(
    ("algorithm", "accept"),
    [(None, 4.0), ("EAGLE", 4.0), ("off", None)],
)
def test_unknown_algorithm_keeps_measured_acceptance(algorithm: str | None, accept: float | None):
    summary = summarize_level(LEVEL, REQUESTS, CellMeta(cell_id="c", algorithm=algorithm), [])
    assert summary.accept_length == accept
