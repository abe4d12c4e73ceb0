"""A run's summary says what it sent: random ids and their lengths, a named workload (and
its replay speed), or a prompts file; the endpoint when not the native one."""

from __future__ import annotations

import pytest

from console.bench.results import RunSummary
from console.bench.tables import to_markdown, workload_line


@pytest.mark.parametrize(
    ("workload", "said"),
    [
        ({"input_len": 512, "output_len": 256, "range_ratio": 1.0, "endpoint": "generate"},
         "Sent: random ids, 512 in / 256 out."),
        ({"input_len": 512, "output_len": 256, "range_ratio": 0.5, "endpoint": "chat"},
         "Sent: random ids, 512 in / 256 out (lengths from 0.5x); endpoint chat."),
        ({"workload": "mooncake-agent", "replay_speed": 2.0, "output_len": 256},
         "Sent: workload mooncake-agent at 2x."),
        ({"workload": "multi-turn", "replay_speed": 1.0}, "Sent: workload multi-turn."),
        ({"dataset": "prompts.jsonl", "output_len": 128},
         "Sent: prompts from prompts.jsonl, up to 128 out."),
        ({}, ""),
    ],
)  # fmt: skip
def test_what_a_run_sent(workload: dict, said: str) -> None:
    summary = RunSummary(run_id="r", run_dir="/tmp/r", workload=workload or None)
    assert workload_line(summary) == said
    shown = to_markdown(summary)
    assert ("Sent:" in shown) is bool(said)
    assert said in shown
