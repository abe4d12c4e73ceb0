"""`metrics --prometheus URL` beside a managed server: a real Prometheus scraping a managed
simulator lists it once, under its id, profile and state, with Prometheus' figures (nothing
else reads the server in this mode); with a matcher set that leaves its target out, it is
still listed, with null figures and the reason."""

from __future__ import annotations

import asyncio
import json
import time

import jsonschema
import pytest

from console.cli.services import Services
from console.core.net import free_port
from console.telemetry.samples import ServerSample
from console.tui.views import ServerView
from tests.conftest import REPO
from tests.promproc import running_prometheus

pytestmark = pytest.mark.slow

METRICS_SCHEMA = json.loads((REPO / "docs" / "metrics.schema.json").read_text())


def _reading(cli, *args: str) -> dict:
    result = cli("--demo", "metrics", "--once", "--json", *args)
    assert result.code == 0, result.err
    reading = json.loads(result.out)
    jsonschema.validate(reading, METRICS_SCHEMA)
    return reading


def test_a_managed_server_prometheus_scrapes_is_listed_once(
    cli, prometheus_binary, tmp_path, monkeypatch
):
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    port = free_port()
    up = cli("--demo", "up", "qwen3.6-27b", "-l", "tp1", "--port", str(port), "--json")
    assert up.code == 0, up.err
    server = json.loads(up.out)["id"]
    instance = f"127.0.0.1:{port}"
    try:
        with running_prometheus(prometheus_binary, [instance], tmp_path) as prom:
            deadline = time.monotonic() + 30
            while not prom.query("sglang:num_running_reqs"):
                assert time.monotonic() < deadline, "Prometheus never scraped the server"
                time.sleep(0.1)

            reading = _reading(cli, "--prometheus", prom.url)
            [entry] = reading["servers"]  # once: not again as its scrape instance
            assert entry["id"] == server
            assert (entry["profile"], entry["layout"], entry["state"]) == (
                "qwen3.6-27b",
                "tp1",
                "ready",
            )
            assert entry["metrics_source"]["state"] == "ok", entry["metrics_source"]
            assert entry["running"] == 0
            assert isinstance(entry["token_usage"], float)
            [target] = reading["prometheus"]["targets"]
            assert (target["instance"], target["server_id"]) == (instance, server)
            assert reading["prometheus"]["match"] is None

            # The console on the same Prometheus lists it once too, with Prometheus' figures
            # in the store under its id (its own /metrics is not read in this mode).
            views, sample = asyncio.run(_console_servers(prom.url, server))
            assert [v.id for v in views] == [server], [(v.id, v.via) for v in views]
            assert views[0].via is None
            assert views[0].state == "ready"
            assert sample is not None
            assert sample.running == 0

            # A matcher set leaving its target out: listed all the same, saying why.
            reading = _reading(
                cli, "--prometheus", prom.url, "--prometheus-match", 'job="elsewhere"'
            )
            [entry] = reading["servers"]
            assert entry["id"] == server
            assert entry["state"] == "ready"
            assert entry["metrics_source"]["state"] == "unavailable"
            assert entry["metrics_source"]["reason"] == f"not scraped by Prometheus {prom.url}"
            assert entry["tok_s"] is None
            assert entry["running"] is None
            assert reading["prometheus"]["targets"] == []
            assert reading["prometheus"]["match"] == '{job="elsewhere"}'
    finally:
        down = cli("--demo", "down", "--all", "--grace", "2")
        assert down.code == 0, down.err


async def _console_servers(url: str, server: str) -> tuple[list[ServerView], ServerSample | None]:
    """The console's backend on Prometheus `url` (demo state): its server rows once the
    managed `server` has a reading, and that reading."""
    live = Services.create(demo=True, prometheus=url).live_backend(recordings=None)
    await live.start()
    try:
        deadline = time.monotonic() + 30
        while live.store.server(server) is None:
            assert time.monotonic() < deadline, "no Prometheus reading under the server's id"
            await asyncio.sleep(0.2)
        return live.servers(), live.store.server(server)
    finally:
        await live.stop()
