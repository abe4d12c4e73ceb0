"""progress.json carries the running level's summed acceptance histogram: it reads back as
written, and a damaged or absent one reads as none (a progress file is advisory)."""

from __future__ import annotations

import json

import pytest

from console.bench.listing import Progress


def test_the_histogram_reads_back_as_written() -> None:
    progress = Progress(cell="c", level=0, done=3, planned=8, correct_drafts_histogram=(4, 9, 2))
    again = Progress.from_json(json.loads(json.dumps(progress.to_json())))
    assert again == progress
    assert Progress.from_json({"cell": "c", "done": 1, "planned": 2}) is not None


@pytest.mark.parametrize(
    "value", [None, [], [1, -2], [1, "2"], [True, 1], "1,2", [0] * 2000, {"0": 1}]
)
def test_a_damaged_histogram_reads_as_none(value: object) -> None:
    progress = Progress.from_json(
        {"cell": "c", "done": 1, "planned": 2, "correct_drafts_histogram": value}
    )
    assert progress is not None
    assert progress.correct_drafts_histogram is None
