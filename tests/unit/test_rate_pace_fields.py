"""A rate search level's pace travels with the level: the rate it completed, the rate it
sent, and why it fell behind, from `levels.jsonl` to its summary, its PASS cell, its notes
and the knee; files written before these fields still load."""

from __future__ import annotations

import shutil
from pathlib import Path

from console.bench.knee import knee_of
from console.bench.results import (
    CellMeta,
    CellSummary,
    Knee,
    LevelRecord,
    LevelSummary,
    RequestResult,
    RunSummary,
)
from console.bench.rundir import RunDir
from console.bench.slo import parse_slo
from console.bench.summary import load_summary, summarize_level
from console.bench.tables import COLUMNS, level_notes, to_markdown

CELL = CellMeta(cell_id="c", algorithm="off", gpus=(0,))
SLO = parse_slo("e2e=1000s")
BEHIND = (
    "fell behind: completed 10.3/s while 14.5/s were sent (offered 16/s; under 90%): the"
    " server does not carry this rate"
)
RUNS = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "runs"


def _record(rate: float, *, achieved: float | None, behind: str | None = None) -> LevelRecord:
    return LevelRecord(
        cell="c",
        level=int(rate),
        label=f"rate {rate:g}/s",
        rate=rate,
        started_wall=0.0,
        wall_s=4.0,
        achieved_rate=achieved,
        sent_rate=rate,
        behind=behind,
    )


def _requests() -> list[RequestResult]:
    return [
        RequestResult(send_wall=i * 0.1, ttft_s=0.05, itl_s=0.01, e2e_s=1.0, output_tokens=50)
        for i in range(20)
    ]


def _summary(record: LevelRecord) -> LevelSummary:
    return summarize_level(record, _requests(), CELL, [], slo=SLO)


def test_the_pace_fields_round_trip_and_are_absent_when_not_measured() -> None:
    record = _record(16, achieved=10.3, behind=BEHIND)
    line = record.to_json()
    assert (line["achieved_rate"], line["sent_rate"], line["behind"]) == (10.3, 16, BEHIND)
    assert LevelRecord.from_json(line) == record
    # A concurrency level (or a line from before the fields) has none of them.
    plain = LevelRecord(cell="c", level=0, concurrency=4)
    assert not {"achieved_rate", "sent_rate", "behind"} & set(plain.to_json())
    old = {key: value for key, value in line.items() if key not in ("achieved_rate", "behind")}
    read = LevelRecord.from_json(old)
    assert (read.achieved_rate, read.behind, read.sent_rate) == (None, None, 16)


def test_a_level_that_fell_behind_fails_whatever_its_latencies() -> None:
    kept_up = _summary(_record(8, achieved=7.9))
    behind = _summary(_record(16, achieved=10.3, behind=BEHIND))
    # Every request met the SLO in both; only the pace tells them apart.
    assert kept_up.slo_attainment == behind.slo_attainment == 1.0
    assert kept_up.slo_pass is True
    assert behind.slo_pass is False
    assert (behind.achieved_rate, behind.sent_rate, behind.behind) == (10.3, 16, BEHIND)
    assert early_stop_free(behind)
    assert LevelSummary.from_json(behind.to_json()) == behind
    passed = COLUMNS["slo_pass"]
    cell = CellSummary(cell_id="c", levels=(kept_up, behind))
    assert passed.get(cell, kept_up) == "pass"
    assert passed.get(cell, behind) == "FAIL (fell behind)"


def early_stop_free(level: LevelSummary) -> bool:
    """The reason is the level's `behind`, not a stop: the level ran its course."""
    return level.early_stop is None and "early_stop" not in level.to_json()


def test_the_whole_reason_is_in_the_level_notes_and_the_markdown() -> None:
    behind = _summary(_record(16, achieved=10.3, behind=BEHIND))
    run = RunSummary(
        run_id="r",
        run_dir="r",
        name="n",
        kind="bench",
        status="done",
        cells=(
            CellSummary(cell_id="c", profile="qwen", layout="tp1", variant="off", levels=(behind,)),
        ),
    )
    assert level_notes(run) == [f"qwen tp1 off level 17 (rate 16/s): {BEHIND}"]
    assert f"- qwen tp1 off level 17 (rate 16/s): {BEHIND}" in to_markdown(run)


def test_a_rate_knee_carries_the_rate_its_level_completed() -> None:
    levels = [
        _summary(_record(4, achieved=4.1)),
        _summary(_record(8, achieved=7.9)),
        _summary(_record(16, achieved=10.3, behind=BEHIND)),
    ]
    knee = knee_of(levels, SLO, searched=True)
    assert knee is not None
    assert (knee.value, knee.first_failing, knee.achieved) == (8, 16, 7.9)
    assert knee.text().startswith("carries 8/s (completed 7.9/s) at E2E")
    assert Knee.from_json(knee.to_json()) == knee
    # A knee stored before the field reads back without it, and says what it always said.
    old = {key: value for key, value in knee.to_json().items() if key != "achieved"}
    before = Knee.from_json(old)
    assert before is not None
    assert before.achieved is None
    assert before.text().startswith("carries 8/s at E2E")


def test_a_concurrency_knee_has_no_achieved_rate() -> None:
    levels = [
        summarize_level(
            LevelRecord(cell="c", level=n, concurrency=n, started_wall=0.0, wall_s=4.0),
            _requests(),
            CELL,
            [],
            slo=SLO,
        )
        for n in (1, 2)
    ]
    knee = knee_of(levels, SLO)
    assert knee is not None
    assert knee.kind == "concurrency"
    assert knee.achieved is None
    assert "achieved" not in knee.to_json()


def test_a_run_folder_from_before_the_fields_still_loads(tmp_path: Path) -> None:
    """A fixture run written before these fields: its summary is rebuilt from its files
    (summary.json removed) and read back, with none of them set."""
    run_id = "20261129-185848-qwen-b15-recheck"
    copy = tmp_path / run_id
    shutil.copytree(RUNS / run_id, copy)
    for name in ("summary.json", "summary.csv", "summary.md"):
        (copy / name).unlink(missing_ok=True)
    summary = load_summary(RunDir(copy))
    levels = [level for _, level in summary.levels()]
    assert levels
    assert all(lv.achieved_rate is None and lv.behind is None for lv in levels)
    assert all(lv.prompt_len_off is None for lv in levels)  # its requests carry no input_len
    # And read again from the summary.json just written.
    assert load_summary(RunDir(copy)) == summary
