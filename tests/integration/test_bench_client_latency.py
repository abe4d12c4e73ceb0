"""While a benchmark runs against a server, its client's exact TTFT/ITL are published with the
server they load (progress.json), and the dashboard's line shows them beside the server's
histogram figures, each labelled by its source (issue 16)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from console.bench.listing import Progress, list_runs
from console.telemetry.keys import SourceId
from console.telemetry.samples import ServerSample
from console.telemetry.store import TimeSeriesStore
from console.tui.views import ServerView
from console.tui.widgets.now_line import now_line
from tests.conftest import run_cli_subprocess
from tests.simproc import MTP, QWEN, running_sim


def _wait_for(run_dir: Path, ready: Callable[[Progress], bool], what: str) -> Progress:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        rows = [r for r in list_runs(run_dir.parent) if r.path == run_dir]
        progress = rows[0].progress if rows else None
        if progress is not None and ready(progress):
            return progress
        time.sleep(0.2)
    raise AssertionError(f"no {what} in {run_dir}/progress.json after 90 s")


def _wait_for_latency(run_dir: Path) -> Progress:
    return _wait_for(run_dir, lambda p: p.ttft_p50_s is not None, "client latency")


def _while_a_bench_runs(url: str, wait: Callable[[Path], Progress]) -> Progress:
    """A detached benchmark of 400 short requests against `url`: what `wait` reads from its
    progress.json while it runs (the benchmark is stopped after)."""
    started = run_cli_subprocess(
        *("bench", "--url", url, "--concurrency", "4", "--requests", "400"),
        *("--input-len", "64", "--output-len", "32", "--detach", "--json"),
    )
    assert started.returncode == 0, started.stderr
    detached = json.loads(started.stdout)
    try:
        return wait(Path(detached["run_dir"]))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(detached["pid"]), signal.SIGTERM)


def test_a_running_bench_publishes_its_clients_latency_for_its_server(tmp_path: Path) -> None:
    with running_sim(QWEN, tmp_path, speed=2) as sim:
        progress = _while_a_bench_runs(sim.url, _wait_for_latency)
    assert progress.server == sim.url
    assert progress.ttft_p50_s is not None
    assert progress.ttft_p99_s is not None
    assert 0 < progress.ttft_p50_s <= progress.ttft_p99_s
    assert progress.itl_p50_s is not None
    assert progress.itl_p99_s is not None
    assert 0 < progress.itl_p50_s <= progress.itl_p99_s


def _sample() -> ServerSample:
    return ServerSample(
        t_mono=10.0,
        source=SourceId.server("qwen"),
        server_id="qwen",
        decode_tok_s=173.4,
        finished_tok_s=None,
        requests_s=None,
        gen_throughput=None,
        running=4.0,
        queued=0.0,
        token_usage=0.1,
        accept_length=None,
        accept_rate=None,
        ttft_p50_s=0.05,
        ttft_p99_s=0.099,
        itl_p50_s=0.036,
        itl_p99_s=0.0598,
        e2e_p50_s=None,
        e2e_p99_s=None,
        spec_verify_s=None,
        latency_scope="window",
        latency_window_s=10.0,
        latency_bounds=(
            ("ttft_p50_s", 0.0, 0.1),
            ("ttft_p99_s", 0.0, 0.1),
            ("itl_p50_s", 0.035, 0.04),
            ("itl_p99_s", 0.04, 0.06),
        ),
    )


def test_the_dashboard_line_shows_both_sources_labelled() -> None:
    store = TimeSeriesStore(100)
    store.put_latest(_sample())
    store.commit()
    view = ServerView(
        id="qwen", profile="qwen3.6-27b", layout="tp1", variant="off", state="ready",
        port=None, gpus=(0,),
    )  # fmt: skip
    client = Progress(
        cell="c1",
        level=0,
        done=40,
        planned=400,
        server="qwen",
        ttft_p50_s=0.0421,
        ttft_p99_s=0.0483,
        itl_p50_s=0.0362,
        itl_p99_s=0.0380,
    )
    line = now_line(store, view, width=400, client=client).plain
    assert "server TTFT p50/p99 <100/<100 ms" in line
    assert "server ITL p50/p99 36/40-60 ms" in line
    assert "bench TTFT p50/p99 42/48 ms" in line
    assert "bench ITL p50/p99 36/38 ms" in line
    alone = now_line(store, view, width=400).plain
    assert "TTFT p50/p99 <100/<100 ms" in alone
    assert "bench" not in alone
    assert "server TTFT" not in alone


def _wait_for_histogram(run_dir: Path) -> Progress:
    return _wait_for(run_dir, lambda p: p.correct_drafts_histogram is not None, "histogram")


def test_a_running_speculative_bench_publishes_its_acceptance_histogram(tmp_path: Path) -> None:
    """The finished requests' spec_correct_drafts_histograms, summed, reach progress.json
    while the level runs, and the dashboard line draws them with the drop position."""
    with running_sim(MTP, tmp_path, speed=2) as sim:
        progress = _while_a_bench_runs(sim.url, _wait_for_histogram)
    histogram = progress.correct_drafts_histogram
    assert histogram is not None
    # MTP drafts 3 tokens a step (num_draft_tokens 4): 0 to 3 of them are accepted.
    assert 2 <= len(histogram) <= 4, histogram
    assert sum(histogram) >= 32 // 4  # at least one request's verify steps
    store = TimeSeriesStore(100)
    store.put_latest(_sample())
    store.commit()
    view = ServerView(
        id="qwen", profile="qwen3.6-27b", layout="tp1", variant="mtp", state="ready",
        port=None, gpus=(0,),
    )  # fmt: skip
    line = now_line(store, view, width=400, client=progress).plain
    assert "bench drafts 0.. " in line
    assert " drop " in line.split("bench drafts 0..")[1]
