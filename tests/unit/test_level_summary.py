"""Level summarisation on hand-built typed inputs: throughput, acceptance (counters first,
per-request when the counters cannot say), step time, chunk mismatch, errors, GPU averages,
speedups and the best per level; and the typed results' JSON read back."""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import pytest

from console.bench.results import (
    CellMeta,
    CellSummary,
    Counters,
    LevelRecord,
    LevelSummary,
    RequestResult,
    RunSummary,
    Stats,
)
from console.bench.summary import _with_speedups, best_per_level, summarize_level
from console.telemetry.run_telemetry import RunGpuReading

RUNS = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "runs"


def request(
    *,
    tokens: int = 128,
    ttft: float = 0.1,
    e2e: float = 4.9,
    verify: int | None = None,
    token_chunks: int | None = None,
    accept: float | None = None,
    error: str | None = None,
) -> RequestResult:
    return RequestResult(
        send_wall=100.0,
        ttft_s=ttft,
        e2e_s=e2e,
        output_tokens=None if error else tokens,
        token_chunks=token_chunks if token_chunks is not None else tokens,
        itl_s=(e2e - ttft) / (tokens - 1),
        chunk_gaps_us=array("q", [30_000, 40_000]),
        spec_verify_ct=verify,
        accept_length=accept,
        error=error,
    )


def record(
    *,
    wall_s: float = 5.0,
    scale: float = 1.0,
    before: Counters | None = None,
    after: Counters | None = None,
) -> LevelRecord:
    return LevelRecord(
        cell="c",
        level=0,
        label="concurrency 1",
        concurrency=1,
        started_wall=100.0,
        ended_wall=110.0,
        wall_s=wall_s,
        time_scale=scale,
        counters_before=before,
        counters_after=after,
    )


AR = CellMeta(cell_id="c", algorithm="off", gpus=(0,))
B15 = CellMeta(cell_id="c", algorithm="DDTREE", ddtree_budget=15, gpus=(0,))


def test_autoregressive_level_throughput_step_and_latency() -> None:
    level = summarize_level(record(wall_s=2.0, scale=2.0), [request(), request()], AR, [])
    assert level.duration_s == 4.0  # real seconds x the simulator's time scale
    assert level.output_tokens == 256
    assert level.output_tok_s == pytest.approx(64.0)
    assert level.request_s == pytest.approx(0.5)
    assert level.accept_length is None
    assert level.accepted_tokens_per_step == 1.0
    assert level.verify_tokens_per_step == 1
    # Autoregressive: one step per token after the first.
    assert level.step_time_s == pytest.approx(4.8 / 127)
    assert level.effective_tok_s == pytest.approx(127 / 4.8)
    assert level.ttft == Stats(
        p50=0.1, p90=0.1, p95=0.1, p99=0.1, mean=0.1, min=0.1, max=0.1, count=2
    )
    assert level.chunk_gap.max == pytest.approx(0.04)
    assert level.chunk_accept_mismatch is None


def test_acceptance_comes_from_the_counters_over_the_level() -> None:
    before = Counters(spec_verify_calls=1000.0, generation_tokens=5000.0)
    after = Counters(spec_verify_calls=1016.0, generation_tokens=5240.0, accept_length_gauge=14.0)
    requests = [request(tokens=120, verify=8, token_chunks=8, accept=9.0)]
    level = summarize_level(record(before=before, after=after), requests, B15, [])
    assert level.verify_tokens_per_step == 16
    assert level.accept_length_counters == 15.0  # 240 tokens over 16 verify steps
    assert level.accept_length == level.accepted_tokens_per_step == 15.0
    assert level.accept_length_per_request == 9.0  # kept, but the counters win
    assert level.accept_length_gauge == 14.0
    assert level.step_time_s == pytest.approx(4.8 / 8)
    # 15 tokens per chunk against 15 accepted per step: no mismatch.
    assert level.chunk_accept_mismatch == pytest.approx(0.0)


def test_counters_that_went_back_leave_the_per_request_acceptance() -> None:
    """A server restarted between the readings: its counters say nothing about the level."""
    before = Counters(spec_verify_calls=1000.0, generation_tokens=5000.0)
    after = Counters(spec_verify_calls=10.0, generation_tokens=50.0)
    requests = [request(tokens=120, verify=30, token_chunks=30, accept=4.0)]
    level = summarize_level(record(before=before, after=after), requests, B15, [])
    assert level.accept_length_counters is None
    assert level.accept_length == 4.0


def test_tokens_per_chunk_against_acceptance_gives_the_mismatch() -> None:
    requests = [request(tokens=120, verify=30, token_chunks=60, accept=4.0)]
    level = summarize_level(record(), requests, B15, [])
    assert level.tokens_per_chunk == 2.0
    assert level.chunk_accept_mismatch == pytest.approx(0.5)


def test_errors_are_counted_by_kind_and_left_out_of_the_numbers() -> None:
    requests = [
        request(),
        request(error="connection refused"),
        request(error="connection refused"),
        request(error="timed out"),
    ]
    level = summarize_level(record(), requests, AR, [])
    assert level.requests == 1
    assert level.errors == 3
    assert level.error_kinds == {"connection refused": 2, "timed out": 1}
    assert level.ttft.count == 1
    assert level.output_tokens == 128


def test_gpu_averages_take_the_cells_gpus_while_the_level_ran() -> None:
    def reading(t: float, index: int, util: float) -> RunGpuReading:
        return RunGpuReading(
            t_wall=t,
            index=index,
            util_pct=util,
            power_w=300.0,
            pcie_rx_bytes_s=None,
            pcie_tx_bytes_s=2e9,
        )

    readings = [
        reading(99.0, 0, 0.0),  # before the level
        reading(101.0, 0, 90.0),
        reading(109.0, 0, 80.0),
        reading(105.0, 1, 10.0),  # another cell's GPU
        reading(111.0, 0, 0.0),  # after
    ]
    level = summarize_level(record(), [request()], AR, readings)
    assert level.gpu_samples == 2
    assert level.gpu_util_pct == 85.0
    assert level.pcie_rx_bytes_s is None
    assert level.pcie_tx_bytes_s == 2e9


def cell(variant: str, algorithm: str, tok_s: list[float]) -> CellSummary:
    return CellSummary(
        cell_id=f"p/tp1/{variant}",
        profile="p",
        layout="tp1",
        variant=variant,
        algorithm=algorithm,
        status="done",
        levels=tuple(
            LevelSummary(level=i, concurrency=c, requests=4, output_tok_s=t)
            for i, (c, t) in enumerate(zip((1, 4), tok_s, strict=True))
        ),
    )


def test_speedup_over_off_and_the_best_per_level() -> None:
    cells = _with_speedups([cell("off", "off", [25.0, 80.0]), cell("b15", "DDTREE", [150.0, 60.0])])
    assert [lv.speedup_vs_off for lv in cells[1].levels] == [6.0, 0.75]
    assert [lv.speedup_vs_off for lv in cells[0].levels] == [1.0, 1.0]
    best = best_per_level(cells)
    assert [(b.concurrency, b.variant, b.output_tok_s) for b in best] == [
        (1, "b15", 150.0),
        (4, "off", 80.0),
    ]


def test_level_summary_json_reads_back_equal() -> None:
    level = summarize_level(
        record(
            before=Counters(spec_verify_calls=0.0, generation_tokens=0.0),
            after=Counters(spec_verify_calls=8.0, generation_tokens=128.0),
        ),
        [request(verify=8, token_chunks=8, accept=16.0), request(error="timed out")],
        B15,
        [],
    )
    data = json.loads(json.dumps(level.to_json()))
    assert LevelSummary.from_json(data) == level
    assert "chunk_accept_mismatch" in data
    assert "accept_length_note" not in data  # written only when set


@pytest.mark.parametrize("run_id", sorted(p.name for p in RUNS.iterdir() if p.is_dir()))
def test_fixture_summary_json_reads_back_to_the_same_bytes(run_id: str) -> None:
    text = (RUNS / run_id / "summary.json").read_text()
    summary = RunSummary.from_json(json.loads(text))
    assert json.dumps(summary.to_json(), indent=2, default=str) + "\n" == text


def test_a_summary_of_another_schema_version_is_refused() -> None:
    data = json.loads(
        (RUNS / sorted(p.name for p in RUNS.iterdir())[0] / "summary.json").read_text()
    )
    data["schema_version"] = RunSummary.SCHEMA_VERSION + 1
    with pytest.raises(ValueError, match="schema"):
        RunSummary.from_json(data)


def test_results_are_frozen_and_keyword_only() -> None:
    level = LevelSummary(level=0)
    with pytest.raises(AttributeError):
        level.requests = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        LevelSummary(0)  # type: ignore[call-arg]
