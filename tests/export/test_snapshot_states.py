"""Acceptance (issue 16): a snapshot of a demo host with one stopped and one ready server,
real simulator processes. The stopped server's figures come from the flight recording the
snapshot prefills its history from: they are its last ones, never live."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from markdown_it import MarkdownIt

from console.core.net import free_port
from tests.conftest import REPO
from tests.export.test_stopped_servers import table_rows

SCHEMA = json.loads((REPO / "docs" / "snapshot.schema.json").read_text())
LIVE = ("tok_s", "running", "queued", "ttft_p50_s", "ttft_p99_s", "itl_p50_s", "itl_p99_s")


def dd(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args, "--demo"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    dd("down", "--all", "--grace", "2")


def test_snapshot_of_a_stopped_and_a_ready_server(tmp_path: Path):
    ids = []
    for gpu in ("0", "1"):
        up = dd(
            "up", "qwen3.6-27b", "-l", "tp1", "--gpus", gpu, "--port", str(free_port()), "--json"
        )
        assert up.returncode == 0, up.stdout + up.stderr
        ids.append(json.loads(up.stdout)["id"])
    ready, stopped = ids
    record = dd("record", "--duration", "2", "--interval", "0.5", "--json")
    assert record.returncode == 0, record.stderr
    down = dd("down", stopped)
    assert down.returncode == 0, down.stdout + down.stderr
    snap = dd("snapshot", "--out", str(tmp_path), "--format", "json,md", "--json")
    assert snap.returncode == 0, snap.stderr
    document = json.loads((tmp_path / "snapshot.json").read_text())
    jsonschema.validate(document, SCHEMA)
    assert {s["id"]: s["state"] for s in document["servers"]} == {
        ready: "ready",
        stopped: "stopped",
    }
    by_id = {s["id"]: s for s in document["reading"]["servers"]}
    gone = by_id[stopped]
    assert all(gone[k] is None for k in LIVE), {k: gone[k] for k in LIVE}
    assert isinstance(by_id[ready]["tok_s"], float)
    assert isinstance(by_id[ready]["running"], float)
    assert by_id[ready]["live"] is True
    assert gone["live"] is False
    # Its last figures, from the recording, are kept apart with the time they were read.
    assert isinstance(gone["last"]["tok_s"], float)
    assert gone["last"]["at_wall"] <= document["created_wall"]
    markdown = (tmp_path / "snapshot.md").read_text()
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    tables = table_rows(tokens)
    # Servers, live metrics (the ready one only), GPUs: each row has its header's cells.
    assert [len(rows) for rows in tables] == [3, 2, 9], markdown
    assert all(set(rows) == {rows[0]} for rows in tables), tables
    metrics = markdown.split("## Server metrics (now)")[1].split("\n## ")[0]
    assert f"| {ready} |" in metrics
    assert stopped not in metrics
    assert f"- {stopped} (stopped): last " in markdown
