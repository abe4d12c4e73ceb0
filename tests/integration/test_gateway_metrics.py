"""`metrics` of DP replicas behind the real `smg`: the gateway is read through its
`/engine_metrics` (smg's main port has no /metrics), so its row is a working source, not an
SGLang server told to start with --enable-metrics, and each replica's figures come through it."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from console.bench.levels import read_counters
from console.bench.results import Counters
from console.core.net import free_port
from tests.integration.test_gateway import (
    LAYOUT,
    PROFILE,
    dd,
    fast_sim,  # noqa: F401 (autouse: skips without smg, stops everything after)
    gateway_workers,
    ps,
    wait_for,
)

pytestmark = pytest.mark.slow

GATEWAY_ID = f"{PROFILE}-{LAYOUT}-1"
REPLICAS = [f"{GATEWAY_ID}.replica{i}" for i in range(2)]


def test_metrics_reads_the_replicas_through_the_gateway() -> None:
    port = free_port()
    up = dd("up", PROFILE, "--layout", LAYOUT, "--port", str(port), "--timeout", "60")
    assert up.returncode == 0, up.stdout + up.stderr
    urls = sorted(ps()[rid]["url"] for rid in REPLICAS)
    wait_for(lambda: sorted(gateway_workers(port)) == urls, 15, "both registered")

    text = dd("metrics", "--once")
    assert text.returncode == 0, text.stdout + text.stderr
    assert "--enable-metrics" not in text.stdout, text.stdout

    result = dd("metrics", "--once", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    servers = {s["id"]: s for s in json.loads(result.stdout)["servers"]}
    assert servers[GATEWAY_ID]["metrics_source"]["state"] == "ok", servers[GATEWAY_ID]
    for rid in REPLICAS:
        assert servers[rid]["metrics_source"]["state"] == "ok", servers.get(rid)
        assert servers[rid]["state"] == "ready"
        assert servers[rid]["running"] is not None, servers[rid]

    # A benchmark level's counters through the gateway: /engine_metrics summed over both
    # workers, equal to the replicas' own /metrics summed (smg has no SGLang /metrics).
    for _ in range(2):
        answer = httpx.post(
            f"http://127.0.0.1:{port}/generate",
            json={"text": "hello", "sampling_params": {"max_new_tokens": 8}},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
    through, direct = asyncio.run(_counters(f"http://127.0.0.1:{port}", urls))
    assert through is not None
    assert through.workers == tuple(urls)
    assert all(c is not None for c in direct)
    total = sum(c.generation_tokens or 0 for c in direct if c is not None)
    assert total > 0
    assert through.generation_tokens == total
    assert through.worker_generation_tokens == tuple(
        c.generation_tokens or 0 for c in direct if c is not None
    )
    assert through.requests == sum(c.requests or 0 for c in direct if c is not None)


async def _counters(
    gateway: str, workers: list[str]
) -> tuple[Counters | None, list[Counters | None]]:
    async with httpx.AsyncClient() as client:
        through = await read_counters(client, gateway)
        direct = [await read_counters(client, url) for url in workers]
    return through, direct
