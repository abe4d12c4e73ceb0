"""Per-worker figures from the gateway's `/engine_metrics`: every worker's series labelled
`worker_addr` (as smg 1.13.0 re-exposes each worker's /metrics), counters summed over a
worker's label sets, deltas over a run, the table and workers.json."""

from __future__ import annotations

import json
from pathlib import Path

from console.bench.workers import (
    WORKERS_FILE,
    GatewayReading,
    Measured,
    WorkerCounters,
    counters_by_worker,
    finish,
    measured,
    per_worker,
    save,
    table,
    workers_report,
)

A = "http://127.0.0.1:41101"
B = "http://127.0.0.1:41102"


def engine_metrics(a_stream: float, b_stream: float, a_reqs: float, b_reqs: float) -> str:
    """The lines smg's /engine_metrics carries for two simulator workers (labels as seen)."""
    labels = 'engine_type="unified",model_name="qwen3.6-27b"'
    return "\n".join(
        [
            "# HELP sglang:generation_tokens_total Number of generation tokens processed.",
            "# TYPE sglang:generation_tokens_total counter",
            f'sglang:generation_tokens_total{{{labels},is_streaming="false",worker_addr="{A}"}} 8',
            f'sglang:generation_tokens_total{{{labels},is_streaming="true",worker_addr="{A}"}} '
            f"{a_stream}",
            f'sglang:generation_tokens_total{{{labels},is_streaming="false",worker_addr="{B}"}} 8',
            f'sglang:generation_tokens_total{{{labels},is_streaming="true",worker_addr="{B}"}} '
            f"{b_stream}",
            "# HELP sglang:num_requests_total Number of requests processed.",
            "# TYPE sglang:num_requests_total counter",
            f'sglang:num_requests_total{{{labels},worker_addr="{A}"}} {a_reqs}',
            f'sglang:num_requests_total{{{labels},worker_addr="{B}"}} {b_reqs}',
            "# TYPE sglang:num_running_reqs gauge",
            f'sglang:num_running_reqs{{{labels},worker_addr="{A}"}} 3',
            "",
        ]
    )


def test_counters_sum_each_workers_label_sets() -> None:
    counters = counters_by_worker(engine_metrics(100, 60, 4, 3))
    assert counters == {A: WorkerCounters(108, 4), B: WorkerCounters(68, 3)}


def test_a_plain_servers_metrics_have_no_workers() -> None:
    text = "# TYPE sglang:generation_tokens_total counter\nsglang:generation_tokens_total 5\n"
    assert counters_by_worker(text) == {}


def test_per_worker_deltas_rates_and_shares() -> None:
    before = GatewayReading("http://gw", 10.0, counters_by_worker(engine_metrics(100, 60, 4, 3)))
    after = GatewayReading("http://gw", 14.0, counters_by_worker(engine_metrics(700, 260, 14, 8)))
    figures = {f.worker: f for f in per_worker(before, after)}
    assert figures[A].output_tokens == 600
    assert figures[B].output_tokens == 200
    assert (figures[A].requests, figures[B].requests) == (10, 5)
    assert figures[A].output_tok_s == 150.0
    assert figures[B].output_tok_s == 50.0
    assert (figures[A].share, figures[B].share) == (0.75, 0.25)
    data = workers_report(before, after).to_json()
    assert data["total_output_tokens"] == 800
    assert data["total_output_tok_s"] == 200.0
    text = table(workers_report(before, after))
    assert A in text
    assert "75%" in text
    assert "200.0" in text


def test_a_worker_that_joined_mid_run_counts_from_zero() -> None:
    before = GatewayReading("http://gw", 0.0, {A: WorkerCounters(50, 1)})
    after = GatewayReading("http://gw", 1.0, {A: WorkerCounters(80, 2), B: WorkerCounters(20, 1)})
    figures = {f.worker: f for f in per_worker(before, after)}
    assert figures[B].output_tokens == 20
    assert figures[A].output_tokens == 30


def test_a_replica_restarted_mid_run_counts_what_it_did_since() -> None:
    """Its counters went back to zero: the whole new reading counts (Prometheus's increase),
    not nothing."""
    before = GatewayReading(
        "http://gw", 0.0, {A: WorkerCounters(5000, 40), B: WorkerCounters(0, 0)}
    )
    after = GatewayReading(
        "http://gw", 2.0, {A: WorkerCounters(1200, 10), B: WorkerCounters(1200, 10)}
    )
    figures = {f.worker: f for f in per_worker(before, after)}
    assert (figures[A].output_tokens, figures[A].requests) == (1200, 10)
    assert figures[A].share == 0.5
    assert figures[A].output_tok_s == 600.0


def test_the_whole_run_figures_say_so_next_to_what_the_run_measured() -> None:
    before = GatewayReading("http://gw", 0.0, {A: WorkerCounters(0, 0), B: WorkerCounters(0, 0)})
    after = GatewayReading(
        "http://gw", 10.0, {A: WorkerCounters(540, 5), B: WorkerCounters(500, 5)}
    )
    report = workers_report(before, after, Measured(1000, 8, 5.0))
    data = report.to_json()
    assert "warm-up" in data["scope"]
    assert (data["measured_output_tokens"], data["measured_output_tok_s"]) == (1000, 200.0)
    assert data["total_output_tok_s"] == 104.0
    text = table(report)
    assert "whole run (10.0 s of wall time, every level with its warm-up" in text
    assert "measured 1000 of these output tokens in 8 requests over 5.0 s" in text
    assert "the other 40 were warm-up" in text


def test_measured_from_the_run_folder(tmp_path: Path) -> None:
    lines = [{"output_tokens": 30}, {"output_tokens": 12}, {"output_tokens": None}]
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "levels.jsonl").write_text(json.dumps({"wall_s": 2.0}) + "\n")
    assert measured(tmp_path) == Measured(42, 3, 2.0)
    assert measured(tmp_path / "none") is None


def test_saved_next_to_the_run(tmp_path: Path) -> None:
    before = GatewayReading("http://gw", 0.0, {A: WorkerCounters(0, 0)})
    after = GatewayReading("http://gw", 2.0, {A: WorkerCounters(10, 1)})
    path = save(tmp_path, workers_report(before, after))
    assert path == tmp_path / WORKERS_FILE
    assert json.loads(path.read_text())["workers"][0]["worker_addr"] == A


def test_no_gateway_no_table(tmp_path: Path) -> None:
    assert finish(None, tmp_path) is None
    assert not (tmp_path / WORKERS_FILE).exists()
