"""`metrics --watch` prints a server's line on a host without GPUs (no NVML): the latency
reader is not tied to the GPU part of the reading (`--once` is held by
tests/integration/test_latency_resolution.py)."""

from __future__ import annotations

from typing import Any

from console.cli.cmd_metrics import _line

SERVER: dict[str, Any] = {
    "id": "127.0.0.1:30123",
    "tok_s": 12.5,
    "accept_length": 2.5,
    "running": 1,
    "queued": 0,
    "latency": {"ttft_p50": {"value_s": 0.05, "lower_s": 0.0, "upper_s": 0.1}},
    "metrics_source": {"state": "ok"},
}


def test_a_watch_line_without_gpus_shows_the_server() -> None:
    line = _line({"gpus": [], "host": None, "servers": [SERVER]})
    assert "127.0.0.1:30123 12.5 tok/s" in line
    assert "ttft p50/p99 <100/" in line
