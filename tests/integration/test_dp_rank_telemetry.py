"""Per-DP-rank telemetry from a real dp2 simulator: round robin splits the work evenly, a
starved rank gets none, a slow rank piles requests up and decodes each one slower.

The simulator labels each scheduler series with `dp_rank` only with dp > 1 (sglang 0.5.23
srt/observability/metrics_collector.py:1391-1392); its DP controller dispatches round robin,
`--load-balance-method auto`'s choice off PD (srt/arg_groups/serving_hook.py:217-235,
srt/managers/data_parallel_controller.py:880-899).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import httpx

from console.telemetry.dp_ranks import decode_counters
from console.telemetry.prometheus import parse
from console.telemetry.samples import ServerSample
from console.telemetry.sglang_source import SglangSource
from tests.simproc import QWEN, running_sim

DP2 = [*QWEN, "--dp-size", "2"]
REQUESTS = 16
CONCURRENCY = 8
MAX_NEW = 192


async def _load(url: str) -> None:
    """REQUESTS native requests, CONCURRENCY at a time, each exactly MAX_NEW tokens."""
    gate = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(timeout=120) as client:

        async def one() -> None:
            async with gate:
                reply = await client.post(
                    f"{url}/generate",
                    json={
                        "text": "the quick brown fox " * 8,
                        "sampling_params": {"max_new_tokens": MAX_NEW, "ignore_eos": True},
                    },
                )
                reply.raise_for_status()

        await asyncio.gather(*(one() for _ in range(REQUESTS)))


async def _watch(url: str) -> tuple[list[ServerSample], dict[int, float], dict[int, float]]:
    """Samples every 0.1 s while the load runs, and each rank's decode counter before and
    after it."""
    async with httpx.AsyncClient(timeout=10) as client:
        before = decode_counters(parse((await client.get(f"{url}/metrics")).text))
        source = SglangSource("dp2", url, client)
        load = asyncio.create_task(_load(url))
        samples: list[ServerSample] = []
        while not load.done():
            result = await source.poll(time.monotonic())
            samples += [s for s in result.samples if isinstance(s, ServerSample)]
            await asyncio.sleep(0.1)
        await load
        after = decode_counters(parse((await client.get(f"{url}/metrics")).text))
    return samples, before, after


def _decoded(before: dict[int, float], after: dict[int, float]) -> dict[int, float]:
    return {rank: after.get(rank, 0.0) - before.get(rank, 0.0) for rank in (0, 1)}


def test_healthy_dp2_splits_round_robin_and_shows_both_ranks(tmp_path: Path):
    with running_sim(DP2, tmp_path, speed=20) as sim:
        samples, before, after = asyncio.run(_watch(sim.url))
    decoded = _decoded(before, after)
    # Round robin: each rank decoded half the requests, all of the same length (the first
    # token of each comes from prefill).
    assert decoded == {0: REQUESTS / 2 * (MAX_NEW - 1), 1: REQUESTS / 2 * (MAX_NEW - 1)}
    # A rank's series appear at its scheduler's first report (SGLang creates them on use).
    samples = [s for s in samples if len(s.dp_ranks) == 2]
    assert [r.rank for r in samples[-1].dp_ranks] == [0, 1]
    for rank in (0, 1):
        assert any((s.dp_ranks[rank].decode_tok_s or 0) > 0 for s in samples), rank
        assert any((s.dp_ranks[rank].running or 0) > 0 for s in samples), rank
    # The ranks add up to the server's figures.
    busy = next(s for s in samples if s.running)
    assert sum(r.running or 0 for r in busy.dp_ranks) == busy.running


def test_starved_rank_gets_no_request(tmp_path: Path):
    with running_sim([*DP2, "--sim-fault", "dp-starve:1"], tmp_path, speed=20) as sim:
        samples, before, after = asyncio.run(_watch(sim.url))
    decoded = _decoded(before, after)
    assert decoded == {0: REQUESTS * (MAX_NEW - 1), 1: 0.0}
    samples = [s for s in samples if len(s.dp_ranks) == 2]
    assert samples
    assert all(not s.dp_ranks[1].running for s in samples if len(s.dp_ranks) == 2)
    assert any((s.dp_ranks[0].running or 0) > 0 for s in samples)


def test_slow_rank_piles_up_requests_and_decodes_each_slower(tmp_path: Path):
    with running_sim([*DP2, "--sim-fault", "dp-slow:1"], tmp_path, speed=20) as sim:
        samples, before, after = asyncio.run(_watch(sim.url))
    # Round robin still hands the slow rank half the requests.
    decoded = _decoded(before, after)
    assert decoded[0] == decoded[1] == REQUESTS / 2 * (MAX_NEW - 1)
    samples = [s for s in samples if len(s.dp_ranks) == 2]
    running = [(s.dp_ranks[0].running or 0, s.dp_ranks[1].running or 0) for s in samples]
    assert max(r1 for _, r1 in running) > max(r0 for r0, _ in running)

    def per_request(rank: int) -> list[float]:
        return [
            (s.dp_ranks[rank].decode_tok_s or 0) / (s.dp_ranks[rank].running or 1)
            for s in samples
            if s.dp_ranks[rank].running and s.dp_ranks[rank].decode_tok_s
        ]

    fast, slow = per_request(0), per_request(1)
    assert fast
    assert slow
    # Medians: a rank's rate spans the poll interval, its running count is one instant.
    assert statistics.median(slow) < statistics.median(fast) / 2


def test_dp1_server_has_no_rank_rows(tmp_path: Path):
    with running_sim(QWEN, tmp_path, speed=20) as sim:

        async def one_sample() -> ServerSample:
            async with httpx.AsyncClient(timeout=10) as client:
                source = SglangSource("dp1", sim.url, client)
                result = await source.poll(time.monotonic())
            (sample,) = result.samples
            assert isinstance(sample, ServerSample)
            return sample

        sample = asyncio.run(one_sample())
    assert sample.running is not None
    assert sample.dp_ranks == ()
