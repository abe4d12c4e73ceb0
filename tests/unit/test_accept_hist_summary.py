"""The acceptance distribution on hand-built inputs: the histogram arithmetic (sum, survival,
drop position, display rows), a level's summed histogram and per-request percentiles, the
requests.jsonl round trip, and a schema-2 summary rebuilt as schema 3."""

from __future__ import annotations

import itertools
import json
import os
import shutil
from array import array
from pathlib import Path

import pytest

from console.bench.acceptance import (
    drop_position,
    histogram_rows,
    mean_accepted,
    sparkline,
    sum_histograms,
    survival,
)
from console.bench.results import CellMeta, LevelRecord, LevelSummary, RequestResult, RunSummary
from console.bench.rundir import RunDir
from console.bench.summary import load_summary, summarize_level

RUNS = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "runs"
RUN_ID = "20261129-185811-qwen-ddtree-budgets"
B32 = CellMeta(cell_id="c", algorithm="DDTREE", ddtree_budget=32, gpus=(0,))


def request(histogram: tuple[int, ...] | None, accept: float | None) -> RequestResult:
    return RequestResult(
        send_wall=100.0,
        ttft_s=0.05,
        e2e_s=1.0,
        output_tokens=64,
        token_chunks=16,
        chunk_gaps_us=array("q", [50_000]),
        spec_verify_ct=sum(histogram) if histogram else None,
        accept_length=accept,
        spec_correct_drafts_histogram=histogram,
    )


LEVEL = LevelRecord(cell="c", level=0, concurrency=2, started_wall=1.0, ended_wall=3.0, wall_s=2.0)


def test_survival_and_the_drop_position() -> None:
    # 10 steps: 1 accepted nothing, 2 accepted one draft, 3 two, 4 three.
    histogram = (1, 2, 3, 4)
    assert survival(histogram) == (1.0, 0.9, 0.7, 0.4, 0.0)
    # Draft 3 is the first reached in fewer than half of the steps (40%).
    assert drop_position(histogram) == 3
    assert mean_accepted(histogram) == pytest.approx(2.0)
    # A drafter always landing its whole draft of 15: drops past it, at 16.
    assert drop_position((0,) * 15 + (9,)) == 16
    # Usually rejected at once: the first draft already drops.
    assert drop_position((6, 3, 1)) == 1
    # Exactly half is not fewer than half.
    assert drop_position((1, 1)) == 2
    assert drop_position(()) is None
    assert survival((0, 0)) == ()


def test_histograms_add_index_by_index() -> None:
    assert sum_histograms([(1, 2), None, (0, 0, 5), (3,)]) == (4, 2, 5)
    assert sum_histograms([None, None]) is None
    assert sum_histograms([]) is None


def test_display_rows_fold_leading_zeros_and_bin_long_histograms() -> None:
    rows = histogram_rows((0,) * 12 + (2, 6, 13, 15))
    assert [row.label for row in rows] == ["0-11", "12", "13", "14", "15"]
    assert [row.steps for row in rows] == [0, 2, 6, 13, 15]
    assert rows[-1].share == pytest.approx(15 / 36)
    # A budget of 64: 65 counts, binned to ten rows at most, every step kept.
    wide = tuple(range(65))
    binned = histogram_rows(wide, 10)
    assert len(binned) <= 10
    assert sum(row.steps for row in binned) == sum(wide)
    assert (binned[0].label, binned[0].steps) == ("0", 0)  # count 0 never happened: one row
    assert binned[1].first == 1
    assert binned[-1].last == 64
    assert all(a.last + 1 == b.first for a, b in itertools.pairwise(binned))
    assert histogram_rows((0, 0)) == []


def test_a_level_sums_its_requests_histograms_and_takes_accept_percentiles() -> None:
    requests = [
        request((1, 2, 3, 4), 3.0),
        request((0, 1, 1), 2.5),
        request(None, 4.0),  # its server sent no histogram: counted in the percentiles only
        request((5,), 1.2),
    ]
    level = summarize_level(LEVEL, requests, B32, [])
    assert level.correct_drafts_histogram == (6, 3, 4, 4)
    assert level.correct_drafts_requests == 3
    assert level.requests == 4
    # Survival 1, 11/17, 8/17, 4/17: draft 2 is the first reached in under half.
    assert level.accept_drop_position == 2
    # Linear interpolation over 1.2, 2.5, 3.0, 4.0 (numpy's default).
    assert level.accept_length_p10 == pytest.approx(1.59)
    assert level.accept_length_p50 == pytest.approx(2.75)
    assert level.accept_length_p90 == pytest.approx(3.7)


def test_a_level_without_histograms_has_none_and_says_nothing_invented() -> None:
    level = summarize_level(LEVEL, [request(None, 5.0), request(None, 4.0)], B32, [])
    assert level.correct_drafts_histogram is None
    assert level.correct_drafts_requests is None
    assert level.accept_drop_position is None
    assert level.accept_length_p50 == pytest.approx(4.5)
    out = level.to_json()
    assert out["correct_drafts_histogram"] is None
    assert LevelSummary.from_json(out) == level


def test_a_levels_distribution_reads_back_from_its_json() -> None:
    level = summarize_level(LEVEL, [request((1, 2, 3, 4), 3.0)], B32, [])
    out = json.loads(json.dumps(level.to_json()))
    assert out["correct_drafts_histogram"] == [1, 2, 3, 4]
    keys = list(out)
    # Since schema 3: after accept_ratio, in this order (schema 4's window and SLO after).
    after = keys[keys.index("accept_ratio") + 1 :]
    assert after[:6] == [
        "correct_drafts_histogram",
        "correct_drafts_requests",
        "accept_drop_position",
        "accept_length_p10",
        "accept_length_p50",
        "accept_length_p90",
    ]
    assert LevelSummary.from_json(out) == level


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        ([0, 3, 9], (0, 3, 9)),
        ([], None),  # the OpenAI API's default for none
        ([1, -2], None),
        ([1, "x"], None),
        ("1,2", None),
        (None, None),
    ],
)
def test_a_requests_histogram_round_trips_and_a_bad_one_reads_as_none(
    stored: object, read: tuple[int, ...] | None
) -> None:
    line = request((1, 2), 2.0).to_json()
    assert line["spec_correct_drafts_histogram"] == [1, 2]
    line["spec_correct_drafts_histogram"] = stored
    assert RequestResult.from_json(line).spec_correct_drafts_histogram == read


def test_a_schema_2_summary_is_rebuilt_as_the_current_schema(tmp_path: Path) -> None:
    copy = tmp_path / RUN_ID
    shutil.copytree(RUNS / RUN_ID, copy)
    path = copy / "summary.json"
    data = json.loads(path.read_text())
    data["schema_version"] = 2
    for cell in data["cells"]:
        for level in cell["levels"]:
            for key in ("correct_drafts_histogram", "accept_length_p50"):
                level.pop(key)
    data["name"] = "written by schema 2"
    path.write_text(json.dumps(data))
    future = path.stat().st_mtime_ns + 10**10
    os.utime(path, ns=(future, future))  # newer than every source: only its version is stale
    summary = load_summary(RunDir(copy))
    assert summary.name == "qwen-ddtree-budgets"
    assert json.loads(path.read_text())["schema_version"] == RunSummary.SCHEMA_VERSION == 4
    levels = [level for _, level in summary.levels()]
    # The fixture's requests carry no histogram: none is invented.
    assert all(level.correct_drafts_histogram is None for level in levels)
    assert any(level.accept_length_p50 is not None for level in levels)


def test_a_sparkline_draws_each_bin_against_the_tallest() -> None:
    assert sparkline((1, 8, 11, 18, 26, 21, 13, 0, 5)) == "▁▃▄▆█▇▅ ▂"
    # 65 counts in at most 16 characters, the last bin the tallest.
    wide = sparkline(tuple(range(65)), 16)
    assert len(wide) <= 16
    assert wide[-1] == "█"
    assert sparkline(()) == ""
