"""States are true in snapshots (issue 16): a stopped or failed server carries no live figures;
its last ones are kept apart with the time they were read. The snapshot's Markdown is valid."""

from __future__ import annotations

import json
import time
from typing import Any

import jsonschema
from markdown_it import MarkdownIt
from markdown_it.token import Token

from console.export.snapshot import build_snapshot, to_markdown
from console.telemetry.keys import SourceId
from console.telemetry.samples import ServerSample, SourceState, SourceStatus
from console.telemetry.store import TimeSeriesStore
from tests.conftest import REPO

SCHEMA = json.loads((REPO / "docs" / "snapshot.schema.json").read_text())
LIVE = ("tok_s", "running", "queued", "ttft_p50_s", "ttft_p99_s", "itl_p50_s", "itl_p99_s")


def sample(t: float, server_id: str, tok_s: float) -> ServerSample:
    return ServerSample(
        t_mono=t,
        source=SourceId.server(server_id),
        server_id=server_id,
        decode_tok_s=tok_s,
        finished_tok_s=None,
        requests_s=None,
        gen_throughput=None,
        running=1.0,
        queued=2.0,
        token_usage=None,
        accept_length=4.5,
        accept_rate=None,
        ttft_p50_s=0.042,
        ttft_p99_s=0.048,
        itl_p50_s=0.0301,
        itl_p99_s=0.038,
        e2e_p50_s=None,
        e2e_p99_s=None,
        spec_verify_s=None,
    )


def lifecycle(server_id: str, state: str, port: int, reason: str | None = None) -> dict[str, Any]:
    """What `server_json` gives (ServerStatus.to_json() plus the plan), the keys read here."""
    return {
        "id": server_id,
        "profile": "demo",
        "layout": "tp1",
        "variant": "off",
        "state": state,
        "reason": reason,
        "port": port,
        "url": f"http://127.0.0.1:{port}",
        "gpus": [0],
        "plan": {"argv": ["python", "-m", "console.sim"], "env": {}, "gpus": [0]},
    }


def two_servers() -> tuple[dict[str, Any], float]:
    """A host with one ready server (qwen) and one that failed after serving (kimi): the store
    still holds kimi's last sample, as the poller or a prefilled recording leaves it."""
    store = TimeSeriesStore(100)
    now = time.monotonic()
    for server_id, tok_s, t in (("qwen", 173.4, now - 1.0), ("kimi", 26.0, now - 30.0)):
        store.put_latest(sample(t, server_id, tok_s))
        store.set_status(
            SourceStatus(name=SourceId.server(server_id), state=SourceState.OK, last_ok_mono=t)
        )
    store.commit()
    servers = [
        lifecycle("qwen", "ready", 30101),
        # A reason from a log line, with a pipe and a line break: must not break the table.
        lifecycle("kimi", "failed", 30102, reason="NCCL error | rank 3\nexited"),
    ]
    document = build_snapshot(
        store=store,
        now_mono=now,
        servers=servers,
        topology={"source": "none", "gpus": [], "numa_nodes": []},
        latest_run=None,
        demo=True,
        source="live",
    )
    return document, now


def test_a_failed_server_has_no_live_figures_and_keeps_its_last_ones_apart():
    document, _ = two_servers()
    jsonschema.validate(document, SCHEMA)
    by_id = {s["id"]: s for s in document["reading"]["servers"]}
    ready, failed = by_id["qwen"], by_id["kimi"]
    assert ready["live"] is True
    assert ready["last"] is None
    assert (ready["tok_s"], ready["running"], ready["queued"]) == (173.4, 1.0, 2.0)
    assert (ready["ttft_p50_s"], ready["itl_p99_s"]) == (0.042, 0.038)
    assert failed["state"] == "failed"
    assert failed["live"] is False
    assert all(failed[k] is None for k in LIVE), {k: failed[k] for k in LIVE}
    last = failed["last"]
    assert (last["tok_s"], last["running"], last["ttft_p50_s"]) == (26.0, 1.0, 0.042)
    # Read 30 s before the snapshot, on the wall clock.
    assert abs(document["created_wall"] - 30.0 - last["at_wall"]) < 0.01


def table_rows(tokens: list[Token]) -> list[list[int]]:
    """Each table's cell count per row (header first)."""
    tables: list[list[int]] = []
    cells = 0
    for token in tokens:
        if token.type == "table_open":
            tables.append([])
        elif token.type == "tr_open":
            cells = 0
        elif token.type in ("th_open", "td_open"):
            cells += 1
        elif token.type == "tr_close":
            tables[-1].append(cells)
    return tables


def test_the_markdown_report_is_valid_and_shows_last_values_as_last():
    document, _ = two_servers()
    markdown = to_markdown(document)
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    tables = table_rows(tokens)
    # Servers (header + 2 rows) and the live metrics (header + qwen only).
    assert tables == [[8, 8, 8], [8, 8]], (tables, markdown)
    metrics = markdown.split("## Server metrics (now)")[1].split("##")[0]
    assert "| qwen | 173.4 |" in metrics
    assert "kimi" not in metrics
    assert "26.0" not in metrics
    stopped = markdown.split("## Stopped servers (last values, not live)")[1]
    clock = time.strftime(
        "%H:%M:%S", time.localtime(document["reading"]["servers"][0]["last"]["at_wall"])
    )
    assert (
        f"- kimi (failed): last 26.0 tok/s, running 1, queued 2, TTFT p50/p99 42/48 ms at {clock}"
        in stopped
    )
    # The reason's pipe is escaped, in one row: the Servers table's kimi row keeps 8 cells.
    assert "NCCL error \\| rank 3 exited" in markdown


def test_a_recordings_instant_dates_the_last_figures_on_its_own_clock():
    """`snapshot --from-recording`: the last figures are dated on the recording's wall clock
    (its t0_wall + position), not the time the snapshot is taken."""
    store = TimeSeriesStore(100)
    store.put_latest(sample(970.0, "kimi", 26.0))
    store.set_status(SourceStatus(name=SourceId.server("kimi"), state=SourceState.OK))
    store.commit()
    document = build_snapshot(
        store=store,
        now_mono=1000.0,
        servers=[lifecycle("kimi", "failed", 30102)],
        topology={"source": "none", "gpus": [], "numa_nodes": []},
        latest_run=None,
        demo=True,
        source="recording",
        now_wall=1_700_000_000.0,
    )
    (entry,) = document["reading"]["servers"]
    assert entry["tok_s"] is None
    assert entry["last"]["at_wall"] == 1_699_999_970.0
