"""A host's fleet figures from its `metrics --watch --json` reading: GPUs busy (held by a live
server, or loaded by someone else) of total, servers ready, tok/s; a reading from another
version or a damaged one gives unknowns, never an exception."""

from __future__ import annotations

import json
from typing import Any

import pytest

from console.fleet.summary import figures


def reading() -> dict[str, Any]:
    gpu = {"util_pct": 0.0, "state": "ok"}
    return {
        "schema_version": 1,
        "gpus": [{**gpu, "index": i} for i in range(8)],
        "servers": [
            {"id": "a-1", "state": "ready", "tok_s": 120.5, "gpus": [0, 1], "url": "http://x"},
            {"id": "b-1", "state": "loading", "tok_s": None, "gpus": [2]},
            {"id": "c-1", "state": "stopped", "tok_s": 0.0, "gpus": [3]},
            {"id": "ext-77", "state": "ready", "tok_s": 10.0, "gpus": [], "external": True},
        ],
        "sources": [{"name": "gpu", "state": "ok", "reason": None}],
    }


def test_figures() -> None:
    data = reading()
    data["gpus"][7]["util_pct"] = 55.0  # no server of ours holds it: someone else's work
    fig = figures(data)
    assert (fig.gpus_busy, fig.gpus_total) == (4, 8)  # 0, 1 (a-1), 2 (b-1 loading), 7
    assert [s.id for s in fig.servers if s.state == "ready"] == ["a-1", "ext-77"]
    assert [s.external for s in fig.servers] == [False, False, False, True]
    assert fig.tok_s == pytest.approx(130.5)
    assert fig.sources[0].state == "ok"


@pytest.mark.parametrize(
    "damage",
    [
        {"gpus": "eight"},
        {"gpus": [None, {"util_pct": "hot"}]},
        {"servers": [{"id": 3}, "x", {"id": "s", "tok_s": float("nan"), "gpus": "0"}]},
        {"sources": {"gpu": "ok"}},
        {"servers": None, "gpus": None, "sources": None},
    ],
)
def test_damaged_readings_give_unknowns(damage: dict[str, Any]) -> None:
    data = {**reading(), **damage}
    fig = figures(json.loads(json.dumps(data, allow_nan=True)))
    assert fig.gpus_total is None or fig.gpus_total >= 0
    for server in fig.servers:
        assert server.tok_s is None or server.tok_s == server.tok_s  # never NaN


def test_an_empty_reading() -> None:
    fig = figures({})
    assert (fig.gpus_busy, fig.gpus_total, fig.servers, fig.tok_s) == (None, None, (), None)
