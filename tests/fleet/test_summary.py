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


READY_IDS = ["a-1", "b-1", "c-1", "ext-77"]


@pytest.mark.parametrize(
    ("damage", "gpus", "server_ids", "tok_s", "sources"),
    [
        # GPUs that are not a list are unknown, not "0 of 0".
        ({"gpus": "eight"}, (None, None), READY_IDS, 130.5, 1),
        ({"gpus": None}, (None, None), READY_IDS, 130.5, 1),
        # A GPU entry that is not an object is skipped; one with a bad util is idle.
        ({"gpus": [None, {"util_pct": "hot"}]}, (0, 1), READY_IDS, 130.5, 1),
        # Servers without a string id are skipped; a NaN rate and bad GPUs are unknown.
        (
            {"servers": [{"id": 3}, "x", {"id": "s", "tok_s": float("nan"), "gpus": "0"}]},
            (0, 8),
            ["s"],
            None,
            1,
        ),
        ({"sources": {"gpu": "ok"}}, (3, 8), READY_IDS, 130.5, 0),
        ({"servers": None, "gpus": None, "sources": None}, (None, None), [], None, 0),
    ],
)
def test_damaged_readings_give_unknowns(
    damage: dict[str, Any],
    gpus: tuple[int | None, int | None],
    server_ids: list[str],
    tok_s: float | None,
    sources: int,
) -> None:
    data = {**reading(), **damage}
    fig = figures(json.loads(json.dumps(data, allow_nan=True)))
    assert (fig.gpus_busy, fig.gpus_total) == gpus
    assert [s.id for s in fig.servers] == server_ids
    assert fig.tok_s == (pytest.approx(tok_s) if tok_s is not None else None)
    assert len(fig.sources) == sources
    for server in fig.servers:
        assert server.tok_s is None or server.tok_s == server.tok_s  # never NaN


def test_an_empty_reading() -> None:
    fig = figures({})
    assert (fig.gpus_busy, fig.gpus_total, fig.servers, fig.tok_s) == (None, None, (), None)
