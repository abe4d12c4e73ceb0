"""Every workload kind against a real simulator process: requests complete with the lengths
asked for, multi-turn chats hit the simulated radix cache, and trace replay keeps the trace's
arrival times."""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from console.bench.client import Endpoint, RequestResult, make_client
from console.bench.levels import LevelOutcome, LevelSpec, Target, run_level
from console.bench.workload import Prompt, Workload
from console.bench.workload_files import resolve
from console.bench.workload_kinds import LengthDistribution, LogNormal, MultiTurn, SharedPrefix
from console.bench.workload_trace import Trace, TraceReplay, TraceRow
from tests.simproc import SMALL, SimProcess, running_sim

SPEED = 20.0


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with running_sim(SMALL, tmp_path_factory.mktemp("sim"), speed=SPEED) as process:
        yield process


def _run(
    sim: SimProcess,
    workload: Workload,
    spec: LevelSpec,
    *,
    endpoint: Endpoint = Endpoint.GENERATE,
    scale: float = SPEED,
) -> tuple[LevelOutcome, dict[int, RequestResult]]:
    by_index: dict[int, RequestResult] = {}

    def keep(index: int, result: RequestResult) -> None:
        by_index[index] = result

    async def go() -> LevelOutcome:
        async with make_client(8, timeout_s=120) as client:
            return await run_level(
                client,
                Target(sim.url, time_scale=scale),
                endpoint,
                workload,
                spec,
                on_result=keep,
                stop=asyncio.Event(),
            )

    outcome = asyncio.run(go())
    errors = [r.error for r in outcome.results if r.error]
    assert not errors, errors
    return outcome, by_index


def _metric(sim: SimProcess, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels`."""
    total = 0.0
    for line in httpx.get(f"{sim.url}/metrics", timeout=10).text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


SMALL_CHAT = LengthDistribution(
    input=LogNormal(median=200, sigma=0.8, low=4, high=2000),
    output=LogNormal(median=24, sigma=0.6, low=1, high=96),
)
KINDS = {
    "random": lambda base: base,
    "chat": lambda base: replace(base, source=SMALL_CHAT),
    "shared-prefix": lambda base: replace(
        base, source=SharedPrefix(prefix_len=256, groups=2, output=SMALL_CHAT.output)
    ),
    "multi-turn": lambda base: replace(
        base,
        source=MultiTurn(
            conversations=3, turns=3, system_len=128, answer=LogNormal(24, 0.5, 4, 64)
        ),
    ),
    "chat-prompts": lambda base: resolve("chat-prompts", base),
    "chat-trace": lambda base: resolve("chat-trace", base),
    "mooncake-agent": lambda base: resolve("mooncake-agent", base),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_workload_kind_runs_against_the_simulator(sim: SimProcess, kind: str):
    workload = KINDS[kind](Workload(input_len=64, output_len=16))
    count = 9
    # A trace is replayed at 4x its own clock on top of the simulator's speed-up.
    replay = 4.0 if workload.timed else None
    spec = LevelSpec(0, 3, None, count, None, warmup=1, replay=replay)
    expected = (
        workload.source.prompts(0, 0, count)
        if workload.source is not None
        else workload.prompts(count, level=0)
    )
    outcome, results = _run(sim, workload, spec)
    assert sorted(results) == list(range(count))
    for index, result in results.items():
        prompt = expected[index]
        assert result.output_tokens == prompt.output_len, (index, prompt)
        if prompt.input_ids is not None:
            assert result.prompt_tokens == prompt.input_len, (index, prompt.input_len)
        else:
            assert (result.prompt_tokens or 0) > 0
    if workload.timed:
        # Open loop on the trace's clock: the level lasts as long as its arrivals.
        span = expected[-1].at_s or 0.0
        assert outcome.wall_s >= span / (SPEED * 4) * 0.95


def _native(sim: SimProcess, prompt: Prompt) -> list[dict]:
    """Every streamed chunk's meta_info of one /generate request."""
    body = {
        "input_ids": list(prompt.input_ids or ()),
        "stream": True,
        "sampling_params": {"max_new_tokens": prompt.output_len, "ignore_eos": True},
    }
    metas = []
    with httpx.stream("POST", f"{sim.url}/generate", json=body, timeout=60) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                metas.append(json.loads(line[6:])["meta_info"])
    return metas


def test_multi_turn_hits_the_simulated_prefix_cache(sim: SimProcess):
    source = MultiTurn(conversations=2, turns=4, system_len=200, answer=LogNormal(32, 0.3, 8, 64))
    workload = Workload(input_len=64, output_len=16, source=source)
    before = _metric(sim, "sglang:cached_tokens_total", cache_source="device")
    cache_before = _metric(sim, "sglang:realtime_tokens_total", mode="prefill_cache")
    # Concurrency 2 over 2 conversations: each turn goes after its conversation's last.
    _run(sim, workload, LevelSpec(5, 2, None, 8, None, warmup=0))
    gained = _metric(sim, "sglang:cached_tokens_total", cache_source="device") - before
    assert gained > 0
    assert (
        _metric(sim, "sglang:realtime_tokens_total", mode="prefill_cache") - cache_before == gained
    )
    stats = sim.stats()["requests"][-8:]
    # Turn 0 of each conversation has nothing cached; every later turn reuses the whole
    # earlier prompt (in whole 16-token blocks; the made-up answer is never cached).
    prompts = source.prompts(5, 0, 8)
    expected = []
    for index, prompt in enumerate(prompts):
        _, turn = source.turn_of(index)
        previous = prompts[index - source.conversations].input_len if turn else 0
        expected.append((prompt.input_len, previous // 16 * 16))
    assert sorted((r["prompt_tokens"], r["cached_tokens"]) for r in stats) == sorted(expected)
    assert sum(r["cached_tokens"] for r in stats) == gained
    # meta_info carries the hit in every chunk of a later turn, and SGLang's breakdown.
    later = source.prompts(5, 2, 1)[0]  # conversation 0, turn 1: its turn 0 is cached
    metas = _native(sim, later)
    assert metas
    assert all(m["cached_tokens"] > 0 for m in metas)
    assert metas[0]["cached_tokens_details"] == {"device": metas[0]["cached_tokens"], "host": 0}
    # The prefill line as SGLang 0.5.23 writes it (scheduler_components/metrics_reporter.py
    # :753-786), the hit in #cached-token.
    line = re.compile(
        r"Prefill batch, #new-seq: 1, #new-token: (\d+), #cached-token: (\d+), token usage: "
        r"\d\.\d\d, #running-req: \d+, #queue-req: \d+, #pending-token: \d+, cuda graph: "
        r"True, input throughput \(token/s\): \d+\.\d\d$",
        re.M,
    )
    logged = [(int(a), int(b)) for a, b in line.findall(sim.log())]
    hit = metas[0]["cached_tokens"]
    assert (later.input_len - hit, hit) in logged
    # /flush_cache empties the tree: the same prompt then hits nothing.
    assert httpx.post(f"{sim.url}/flush_cache", timeout=30).status_code == 200
    assert all(
        m["cached_tokens"] == 0 and m["cached_tokens_details"] is None for m in _native(sim, later)
    )


TURNS = MultiTurn(conversations=4, turns=4, system_len=64, answer=LogNormal(24, 1.0, 4, 160))


@pytest.mark.parametrize(
    ("concurrency", "rate"),
    [(4, None), (8, None), (None, 1000.0)],
    ids=["closed-4", "closed-8", "open"],
)
def test_multi_turn_sends_a_turn_only_after_the_previous_one_finished(
    sim: SimProcess, concurrency: int | None, rate: float | None
):
    """Answers of very different lengths, so in a plain closed loop (or an open loop far
    above the server's rate) a later turn would often go while its previous turn is still
    generating. A turn's send must follow its predecessor's completion: that send plus its
    E2E in real seconds (the simulator's figures are in its own, SPEED times faster)."""
    workload = Workload(input_len=64, output_len=16, source=TURNS)
    count = TURNS.conversations * TURNS.turns
    _, results = _run(sim, workload, LevelSpec(3, concurrency, rate, count, None, warmup=0))
    assert sorted(results) == list(range(count))
    prompts = TURNS.prompts(3, 0, count)
    for index, result in results.items():
        assert result.output_tokens == prompts[index].output_len
        before = TURNS.after(index)
        if before is None:
            continue
        previous = results[before]
        finished = previous.send_wall + (previous.e2e_s or 0.0) / SPEED
        assert result.send_wall >= finished - 0.001, (index, result.send_wall - finished)


def test_multi_turn_duration_level_ends_at_its_deadline(sim: SimProcess):
    """A timed level has no request count: streams waiting for a conversation's previous
    turn still stop at the deadline, and the turns sent keep their order."""
    workload = Workload(input_len=64, output_len=16, source=TURNS)
    outcome, results = _run(sim, workload, LevelSpec(4, 6, None, None, 1.5, warmup=0))
    assert results
    assert outcome.wall_s < 1.5 / SPEED + 30  # ended: the deadline plus the last answers
    for index, result in results.items():
        before = TURNS.after(index)
        if before is not None:
            previous = results[before]
            assert result.send_wall >= previous.send_wall + (previous.e2e_s or 0.0) / SPEED - 0.001


def _trace(count: int, gap_s: float) -> Trace:
    rows = tuple(
        TraceRow(index * gap_s + (0.37 * gap_s if index % 3 == 1 else 0.0), 48 + index % 5, 6)
        for index in range(count)
    )
    return Trace("synthetic", "jsonl", rows)


def test_trace_replay_keeps_the_arrival_times(tmp_path: Path):
    """Sends land at the trace's offsets (real seconds here: the simulator runs at speed 1 and
    the target's time scale is 1), measured from the level's start stamp (taken just before
    the trace clock starts). Each request records its own lateness, which agrees with that
    measure. What holds on any machine is asserted: no send early, every send placed
    absolutely on the trace clock (no drift), the lateness recorded per request; the per-send
    figures (p99 and max within 5 ms on a quiet machine) are bench/trace_replay.py's, in
    bench/RESULTS.md, since under `pytest -n 4` on a busy 2-core machine a single send can
    wait on the OS scheduler for tens of ms."""
    trace = _trace(60, 0.05)
    workload = Workload(input_len=48, output_len=6, source=TraceReplay(trace))
    with running_sim(SMALL, tmp_path, speed=1) as sim:
        spec = LevelSpec(0, None, None, len(trace.rows), None, warmup=1, replay=1.0)
        outcome, results = _run(sim, workload, spec, scale=1.0)
    sends = sorted(results.items())
    assert [index for index, _ in sends] == list(range(len(trace.rows)))
    start = outcome.started_wall
    late = [(result.send_wall - start) - trace.rows[index].at_s for index, result in sends]
    recorded = [result.send_late_s for _, result in sends]
    assert all(value is not None for value in recorded)
    # The recorded lateness is the same measure (one on perf_counter, one on the wall clock).
    assert max(abs(a - (b or 0.0)) for a, b in zip(late, recorded, strict=True)) < 0.002
    assert min(late) > -0.001, min(late)
    assert min(value or 0.0 for value in recorded) >= 0.0
    assert statistics.median(late) < 0.005, sorted(late)[-5:]
    # No drift: the last third is no later on the whole than the first third.
    third = len(late) // 3
    assert statistics.median(late[-third:]) < statistics.median(late[:third]) + 0.003
    assert outcome.wall_s >= trace.span_s
    # Token-id prompts: what was sent is recorded, and the server counted as much.
    assert all(result.input_len == result.prompt_tokens for _, result in sends)
    assert [result.input_len for _, result in sends[:5]] == [48, 49, 50, 51, 52]


def test_token_id_prompts_record_their_length_and_the_server_agrees(sim: SimProcess):
    """The prompt length check's inputs against the simulator (SGLang counts `input_ids` as
    sent, sglang 0.5.23 srt/managers/tokenizer_manager.py:1118-1119): ids sent
    over /generate are recorded and match `prompt_tokens`; over chat, ids go as words and
    nothing is recorded."""
    workload = Workload(input_len=40, output_len=4)
    spec = LevelSpec(0, 2, None, 6, None, warmup=0)
    _, results = _run(sim, workload, spec)
    assert len(results) == 6
    assert all(r.input_len == r.prompt_tokens == 40 for r in results.values())
    _, chat = _run(sim, workload, spec, endpoint=Endpoint.CHAT)
    assert all(r.input_len is None for r in chat.values())


def _completion_usage(sim: SimProcess, ids: list[int]) -> dict:
    body = {
        "model": "default",
        "prompt": ids,
        "max_tokens": 2,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    usage: dict = {}
    with httpx.stream("POST", f"{sim.url}/v1/completions", json=body, timeout=60) as response:
        for line in response.iter_lines():
            if line.startswith("data: {") and '"usage":{' in line:
                usage = json.loads(line[6:])["usage"]
    return usage


def test_cache_report_and_disabled_radix_cache(tmp_path: Path):
    ids = list(range(100, 164))  # 4 whole blocks: all but the last token can be reused
    with running_sim([*SMALL, "--enable-cache-report"], tmp_path, speed=SPEED) as sim:
        assert _completion_usage(sim, ids)["prompt_tokens_details"] == {"cached_tokens": 0}
        assert _completion_usage(sim, ids)["prompt_tokens_details"] == {"cached_tokens": 63}
    with running_sim([*SMALL, "--disable-radix-cache"], tmp_path, speed=SPEED) as sim:
        _completion_usage(sim, ids)
        usage = _completion_usage(sim, ids)
        assert "prompt_tokens_details" not in usage  # no --enable-cache-report
        assert _metric(sim, "sglang:cached_tokens_total") == 0
        assert [r["cached_tokens"] for r in sim.stats()["requests"][-2:]] == [0, 0]


def test_a_stop_mid_replay_keeps_only_what_was_sent(sim: SimProcess):
    """Requests whose time has not come are never sent and never recorded; the level ends at
    once."""
    rows = tuple(TraceRow(index * 0.5, 32, 4) for index in range(20))
    workload = Workload(source=TraceReplay(Trace("slow", "jsonl", rows)))
    spec = LevelSpec(0, None, None, None, None, warmup=0, replay=1.0)
    kept: list[int] = []

    async def go() -> tuple[LevelOutcome, float]:
        stop = asyncio.Event()
        async with make_client(4, timeout_s=60) as client:
            asyncio.get_running_loop().call_later(1.2, stop.set)
            began = time.monotonic()
            outcome = await run_level(
                client,
                Target(sim.url, time_scale=1.0),
                Endpoint.GENERATE,
                workload,
                spec,
                on_result=lambda index, result: kept.append(index),
                stop=stop,
            )
            return outcome, time.monotonic() - began

    outcome, took = asyncio.run(go())
    assert outcome.interrupted
    assert sorted(kept) == [0, 1, 2]
    assert took < 5.0  # not the trace's 9.5 s
