"""A managed server that ended stays in a reading for a while, with its state and reason and
no figures, after its telemetry source is gone: another host's console (which sees this host
only through its readings) shows why it ended instead of losing it."""

from __future__ import annotations

import json
import time
from typing import Any

import jsonschema

from console.fleet.summary import figures
from console.telemetry.reading import ENDED_LISTED_S, SERVER_FIGURES, store_reading
from console.telemetry.store import TimeSeriesStore
from tests.conftest import REPO

SCHEMA = json.loads((REPO / "docs" / "metrics.schema.json").read_text())
SERVER_SCHEMA = {"$ref": "#/$defs/server", "$defs": SCHEMA["$defs"]}


def life(
    server_id: str, state: str, ended_wall: float | None, reason: str | None
) -> dict[str, Any]:
    """The keys of ServerStatus.to_json() a reading takes."""
    return {
        "id": server_id,
        "profile": "qwen3.6-27b",
        "layout": "tp1",
        "variant": "off",
        "state": state,
        "reason": reason,
        "url": "http://127.0.0.1:31000",
        "gpus": [3],
        "numa_nodes": [1],
        "pid": 4242,
        "uptime_s": None,
        "log_path": "/var/log/dd/qwen.log",
        "ended_wall": ended_wall,
    }


def test_a_recently_ended_server_is_listed_with_its_reason_and_no_figures() -> None:
    now = time.time()
    lifecycle = {
        "qwen-a": life("qwen-a", "failed", now - 30, "exited 137 (SIGKILL)"),
        "qwen-b": life("qwen-b", "stopped", now - ENDED_LISTED_S - 60, "stopped by down"),
        "qwen-c": life("qwen-c", "ready", None, None),  # live but not yet read: not invented
    }
    reading: dict[str, Any] = store_reading(TimeSeriesStore(), lifecycle, now_wall=now)
    servers: list[dict[str, Any]] = reading["servers"]
    [entry] = servers
    jsonschema.validate(entry, SERVER_SCHEMA)
    assert entry["id"] == "qwen-a"
    assert (entry["state"], entry["reason"]) == ("failed", "exited 137 (SIGKILL)")
    assert entry["ended_wall"] == now - 30
    # What another host's console shows of it: its NUMA binding, pid and log there.
    assert (entry["numa_nodes"], entry["pid"], entry["log_path"]) == (
        [1],
        4242,
        "/var/log/dd/qwen.log",
    )
    assert entry["live"] is False
    assert entry["last"] is None
    assert all(entry[name] is None for name in SERVER_FIGURES)
    assert entry["metrics_source"]["state"] == "unavailable"

    # Read by the fleet: one ended server, counted in no host's whole, its reason carried.
    [brief] = figures(reading).servers
    assert brief.ended
    assert brief.reason == "exited 137 (SIGKILL)"
