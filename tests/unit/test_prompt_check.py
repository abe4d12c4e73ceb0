"""Token-id prompts the server counted at another length than sent are counted per level
and noted; text prompts (whose token count is the server's) are left out."""

from __future__ import annotations

from console.bench.client import Endpoint, ids_sent
from console.bench.prompt_check import prompt_len_counts, prompt_len_note
from console.bench.results import (
    CellMeta,
    CellSummary,
    LevelRecord,
    LevelSummary,
    RequestResult,
    RunSummary,
)
from console.bench.summary import summarize_level
from console.bench.tables import level_notes, to_markdown
from console.bench.workload import Prompt

CELL = CellMeta(cell_id="c", algorithm="off", gpus=(0,))


def req(sent: int | None, counted: int | None, error: str | None = None) -> RequestResult:
    return RequestResult(
        send_wall=0.0,
        ttft_s=0.05,
        e2e_s=1.0,
        output_tokens=10,
        input_len=sent,
        prompt_tokens=counted,
        error=error,
    )


def test_only_token_id_prompts_counted_by_the_server_are_checked() -> None:
    requests = [
        req(100, 100),
        req(100, 110),  # 10% off: within the tolerance
        req(100, 111),  # over it
        req(100, 80),  # under it
        req(None, 400),  # text: its length is the server's to count
        req(100, None),  # the server did not say
        req(100, 500, error="HTTP 500"),  # failed: not checked
    ]
    assert prompt_len_counts(requests) == (4, 2)
    assert prompt_len_counts([req(None, 12)]) == (None, None)


def test_the_level_summary_counts_them_and_the_tables_note_them() -> None:
    record = LevelRecord(
        cell="c", level=0, label="concurrency 2", concurrency=2, started_wall=0.0, wall_s=4.0
    )
    level = summarize_level(record, [req(64, 65), req(64, 80), req(64, 64)], CELL, [])
    assert (level.prompt_len_checked, level.prompt_len_off) == (3, 1)
    assert LevelSummary.from_json(level.to_json()) == level
    note = prompt_len_note(level)
    assert note is not None
    assert note.startswith("1 of 3 token-id prompts were counted by the server")
    run = RunSummary(
        run_id="r",
        run_dir="r",
        name="n",
        kind="bench",
        status="done",
        cells=(CellSummary(cell_id="c", levels=(level,)),),
    )
    assert level_notes(run) == [f"level 1 (concurrency 2): {note}"]
    assert f"- level 1 (concurrency 2): {note}" in to_markdown(run)
    # None off: no note, and a level of text prompts writes neither field.
    fine = summarize_level(record, [req(64, 64)], CELL, [])
    assert fine.prompt_len_off == 0
    assert prompt_len_note(fine) is None
    text = summarize_level(record, [req(None, 64)], CELL, [])
    assert not {"prompt_len_checked", "prompt_len_off"} & set(text.to_json())


def test_the_ids_sent_are_recorded_where_the_body_carries_ids() -> None:
    ids = Prompt(input_ids=(1, 2, 3), text=None, input_len=3, output_len=4)
    text = Prompt(input_ids=None, text="hello there", input_len=3, output_len=4)
    assert ids_sent(Endpoint.GENERATE, ids) == 3
    assert ids_sent(Endpoint.COMPLETIONS, ids) == 3
    assert ids_sent(Endpoint.CHAT, ids) is None  # sent as the words of a message
    assert ids_sent(Endpoint.GENERATE, text) is None


def test_input_len_round_trips_and_old_lines_load() -> None:
    result = req(64, 64)
    line = result.to_json()
    assert line["input_len"] == 64
    assert RequestResult.from_json(line).input_len == 64
    del line["input_len"]
    assert RequestResult.from_json(line).input_len is None
