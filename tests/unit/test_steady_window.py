"""The steady window of a closed-loop level, on known timings: latency statistics count the
requests sent in [first completion, last send), so the first wave (sent before any request
finished) and the last send are left out, and a long request sent inside counts as much as a
short one; completions inside give the request rate; open loop and `--include-transients`
keep every request; a level too short says so."""

from __future__ import annotations

import pytest

from console.bench.results import CellMeta, LevelRecord, RequestResult
from console.bench.steady import ALL, STEADY, steady_window
from console.bench.summary import summarize_level

T0 = 1000.0
AR = CellMeta(cell_id="c", algorithm="off", gpus=(0,))


def req(send: float, e2e: float, tokens: int = 10, ttft: float = 0.0) -> RequestResult:
    return RequestResult(
        send_wall=T0 + send, ttft_s=ttft, e2e_s=e2e, output_tokens=tokens, itl_s=0.01
    )


def closed_loop_c2() -> list[RequestResult]:
    """Two workers, each request 1 s long but the first wave's 2 s (a cold prefill burst):
    worker A sends at 0, 2, 3, 4, 5, 6; worker B at 0, 2.5, 3.5, 4.5, 5.5."""
    a = [req(0, 2.0), req(2, 1.0), req(3, 1.0), req(4, 1.0), req(5, 1.0), req(6, 1.0)]
    b = [req(0, 2.5), req(2.5, 1.0), req(3.5, 1.0), req(4.5, 1.0), req(5.5, 1.0)]
    return a + b


def test_the_first_wave_and_the_drain_are_left_out() -> None:
    requests = closed_loop_c2()
    window = steady_window(requests, concurrency=2, rate=None, started_wall=T0, duration_s=7.0)
    assert window.kind == STEADY
    # From the first completion (2.0) to the last send (6.0).
    assert window.start_s == pytest.approx(2.0)
    assert window.end_s == pytest.approx(6.0)
    sends = sorted(r.send_wall - T0 for r in window.requests)
    # Out: the first wave (sent at 0) and the last send (6.0); 5.5 ends after the window
    # but was sent inside it.
    assert sends == [2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5]
    # Completions in (2, 6]: 2.5 to 6 every half second, two workers' 1 s requests.
    assert window.completions == 8
    assert window.duration_s == pytest.approx(4.0)
    # Tokens inside [2, 6]: the first wave's ended at 2 and 2.5 (B's: 10 tokens over 2.5 s,
    # 0.5 s inside = 2), seven whole requests (70), 5.5->6.5 half inside (5): 77.
    assert window.output_tokens == pytest.approx(77.0)


def test_concurrency_one_leaves_out_the_first_and_the_last_request() -> None:
    requests = [req(i, 1.0) for i in range(6)]
    window = steady_window(requests, concurrency=1, rate=None, started_wall=T0, duration_s=6.0)
    assert window.kind == STEADY
    assert sorted(r.send_wall - T0 for r in window.requests) == [1.0, 2.0, 3.0, 4.0]
    assert window.completions == 4  # after the one at 1: at 2, 3, 4 and 5 (1 a second)


def test_the_level_summary_counts_the_window_and_keeps_every_request_in_its_totals() -> None:
    requests = closed_loop_c2()
    record = LevelRecord(
        cell="c", level=0, concurrency=2, started_wall=T0, ended_wall=T0 + 7, wall_s=7.0
    )
    level = summarize_level(record, requests, AR, [])
    assert level.window == STEADY
    assert level.requests == 11
    assert level.counted_requests == 8
    assert level.ttft.count == 8
    assert level.e2e.max == pytest.approx(1.0)  # the 2 s and 2.5 s first wave is left out
    assert level.output_tok_s == pytest.approx(77.0 / 4.0)
    assert level.request_s == pytest.approx(2.0)
    assert level.window_start_s == pytest.approx(2.0)
    with_all = summarize_level(record, requests, AR, [], include_transients=True)
    assert with_all.window == ALL
    assert with_all.window_note is not None
    assert "include-transients" in with_all.window_note
    assert with_all.e2e.max == pytest.approx(2.5)
    assert with_all.output_tok_s == pytest.approx(110 / 7.0)


def test_an_open_loop_level_keeps_every_request() -> None:
    requests = [req(i * 0.5, 1.0) for i in range(10)]
    window = steady_window(requests, concurrency=None, rate=2.0, started_wall=T0, duration_s=5.5)
    assert window.kind == ALL
    assert window.why is not None
    assert "open loop" in window.why
    assert len(window.requests) == 10


def test_a_level_too_short_for_a_steady_state_counts_everything_and_says_so() -> None:
    # Four workers, eight requests: the first wave is half of them and the rest drain.
    requests = [req(0, 1.0 + i * 0.1) for i in range(4)] + [
        req(1.0 + i * 0.1, 1.0) for i in range(4)
    ]
    window = steady_window(requests, concurrency=4, rate=None, started_wall=T0, duration_s=2.5)
    assert window.kind == ALL
    assert window.why is not None
    assert "too short" in window.why
    assert "concurrency 4" in window.why
    assert len(window.requests) == 8


def test_time_scale_puts_the_window_in_server_seconds() -> None:
    # A simulator at 10x: real seconds are a tenth of the server's.
    requests = [req(i * 0.1, 1.0) for i in range(6)]
    window = steady_window(
        requests, concurrency=1, rate=None, started_wall=T0, duration_s=6.0, time_scale=10.0
    )
    assert window.kind == STEADY
    assert window.start_s == pytest.approx(1.0)
    assert window.end_s == pytest.approx(5.0)


def test_a_long_request_sent_inside_counts_however_long_it_runs() -> None:
    # One worker: 1 s requests, but the fourth takes 10 s. Only the whole-lifetime rule would
    # drop it (it ends after the last send) and read the level's E2E as 1 s.
    requests = [req(0, 1.0), req(1, 1.0), req(2, 1.0), req(3, 10.0), req(13, 1.0), req(14, 1.0)]
    window = steady_window(requests, concurrency=1, rate=None, started_wall=T0, duration_s=15.0)
    assert window.kind == STEADY
    assert max(r.e2e_s or 0.0 for r in window.requests) == pytest.approx(10.0)


def test_a_sweep_with_a_level_too_short_counts_every_level_the_same_way(tmp_path) -> None:
    # A recorded campaign: 8 requests per level at concurrency 1 (steady window) and 4 (too
    # short for one). Mixing the two would put a method's step into the curve.
    import shutil
    from pathlib import Path

    from console.bench.rundir import RunDir
    from console.bench.summary import summarize_run

    name = "20261129-185848-qwen-b15-recheck"
    fixture = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "runs" / name
    shutil.copytree(fixture, tmp_path / name)
    summary = summarize_run(RunDir.open(tmp_path, name))
    for cell in summary.cells:
        assert [lv.window for lv in cell.levels] == [ALL, ALL]
        for level in cell.levels:
            assert level.window_note == (
                "concurrency 4 was too short for a steady state, so each level of the cell "
                "counts every request"
            )
            assert level.counted_requests == level.requests == 8
