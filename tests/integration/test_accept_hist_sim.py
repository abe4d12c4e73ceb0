"""The acceptance histogram end to end on real simulator processes: the simulator sends
`spec_correct_drafts_histogram` as SGLang 0.5.23 does, the bench client reads it from the
final chunk (native and OpenAI), and `runs show --json` carries each level's distribution.

SGLang's identities, checked on every request: the histogram sums to `spec_verify_ct` and
its weighted sum is `spec_num_correct_drafts` (both counted per verify step,
srt/managers/scheduler_components/batch_result_processor.py:832-836); `spec_accept_length`
is `completion_tokens / spec_verify_ct` (srt/managers/tokenizer_manager.py:3165-3168).
The completion is the prefill's token plus, per step, the drafts accepted and the bonus
token, less what the last step ran past the length limit (its drafts still count:
srt/managers/schedule_batch.py:1995-2005), so `1 + sum(h) + sum(k * h[k])` is the
completion plus less than one step's drafts.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from console.bench.acceptance import mean_accepted
from console.bench.client import Endpoint, RequestResult, run_request
from console.bench.results import RunSummary
from console.bench.workload import Prompt
from tests.simproc import QWEN, SMALL, SimProcess, running_sim

B32 = [
    *QWEN,
    "--speculative-algorithm",
    "DDTREE",
    "--speculative-draft-model-path",
    "z-lab/Qwen3.6-27B-DFlash",
    "--speculative-ddtree-budget",
    "32",
]
"""Qwen3.6-27B DDTree budget 32: 5.0 tokens per step, 17 at most (console/sim/catalog.toml),
so the accepted drafts spread over several counts."""
OUTPUT = 160
SPEC_TOKENS_DETAILS_KEYS = [
    "spec_accept_rate",
    "spec_accept_length",
    "spec_cap_length",
    "spec_block_accept_length",
    "spec_num_correct_drafts",
    "spec_num_proposed_drafts",
    "spec_verify_ct",
    "spec_correct_drafts_histogram",
    "spec_cap_lens_histogram",
]
"""`SpecTokensDetails`' fields in order (sglang 0.5.23 srt/entrypoints/openai/protocol.py:
456-467)."""


@pytest.fixture(scope="module")
def b32_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with running_sim(B32, tmp_path_factory.mktemp("b32"), speed=40) as sim:
        yield sim


def _prompt(index: int) -> Prompt:
    return Prompt(tuple(range(index, index + 48)), None, 48, OUTPUT)


def _requests(sim: SimProcess, endpoint: Endpoint, count: int) -> list[RequestResult]:
    async def send() -> list[RequestResult]:
        async with httpx.AsyncClient(timeout=60) as client:
            return [
                await run_request(client, sim.url, endpoint, _prompt(i), time_scale=sim.speed)
                for i in range(count)
            ]

    return asyncio.run(send())


def _check_identities(result: RequestResult) -> tuple[int, ...]:
    assert result.error is None, result.error
    histogram = result.spec_correct_drafts_histogram
    assert histogram is not None
    assert histogram[-1] > 0  # grown to the largest count seen, no trailing zeros
    assert sum(histogram) == result.spec_verify_ct
    drafts = sum(k * count for k, count in enumerate(histogram))
    assert result.output_tokens == OUTPUT
    overshoot = 1 + sum(histogram) + drafts - OUTPUT
    assert 0 <= overshoot < len(histogram)
    assert result.accept_length is not None
    assert result.accept_length * sum(histogram) == pytest.approx(OUTPUT)
    return histogram


@pytest.mark.parametrize("endpoint", [Endpoint.GENERATE, Endpoint.CHAT, Endpoint.COMPLETIONS])
def test_the_client_reads_each_requests_histogram(b32_sim: SimProcess, endpoint: Endpoint):
    results = _requests(b32_sim, endpoint, 3)
    histograms = [_check_identities(result) for result in results]
    steps = [sum(h) for h in histograms]
    # Consistent with the simulator's acceptance model: 1 + Binomial(16, 0.25) committed
    # per step, so about 4 drafts accepted (3 requests x ~32 steps: well within 0.75).
    accepted = [mean_accepted(h) or 0.0 for h in histograms]
    mean = sum(a * s for a, s in zip(accepted, steps, strict=True)) / sum(steps)
    assert mean == pytest.approx(4.0, abs=0.75)
    assert max(len(h) for h in histograms) > 5  # a spread, not one count


def test_native_meta_info_carries_it_in_the_final_chunk_only(b32_sim: SimProcess):
    body = {
        "input_ids": list(range(32)),
        "stream": True,
        "sampling_params": {"max_new_tokens": 64, "ignore_eos": True},
    }
    with b32_sim.client() as client, client.stream("POST", "/generate", json=body) as response:
        chunks = [
            json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")
        ]
    *early, final = [chunk["meta_info"] for chunk in chunks]
    assert all("spec_correct_drafts_histogram" not in meta for meta in early)
    histogram = final["spec_correct_drafts_histogram"]
    assert sum(histogram) == final["spec_verify_ct"]
    assert sum(k * n for k, n in enumerate(histogram)) == final["spec_num_correct_drafts"]
    # In SGLang's order: after the other speculative keys (tokenizer_manager.py:3163-3201).
    keys = list(final)
    assert keys.index("spec_verify_ct") < keys.index("spec_correct_drafts_histogram")


def test_sglext_carries_every_spec_tokens_details_field(b32_sim: SimProcess):
    body = {
        "model": "qwen3.6-27b",
        "prompt": list(range(32)),
        "max_tokens": 40,
        "ignore_eos": True,
        "return_spec_tokens_details": True,
    }
    with b32_sim.client() as client:
        reply = client.post("/v1/completions", json=body).json()
    details = reply["sglext"]["spec_tokens_details"]
    assert list(details) == SPEC_TOKENS_DETAILS_KEYS
    assert sum(details["spec_correct_drafts_histogram"]) == details["spec_verify_ct"]
    assert details["spec_cap_lens_histogram"] == []


def test_an_autoregressive_server_sends_no_histogram(tmp_path: Path):
    with running_sim(SMALL, tmp_path, speed=40) as sim:
        native, chat = (
            _requests(sim, endpoint, 1)[0] for endpoint in (Endpoint.GENERATE, Endpoint.CHAT)
        )
    for result in (native, chat):
        assert result.error is None, result.error
        assert result.output_tokens == OUTPUT
        assert result.spec_correct_drafts_histogram is None
        assert result.spec_verify_ct is None


def test_runs_show_json_carries_each_levels_distribution(b32_sim: SimProcess, cli) -> None:
    ran = cli(
        *("bench", "--url", b32_sim.url, "--concurrency", "1,4", "--requests", "4"),
        *("--input-len", "48", "--output-len", str(OUTPUT), "--warmup", "0", "--json"),
    )
    assert ran.code == 0, ran.err[-2000:]
    run_id = json.loads(ran.out)["run_id"]
    shown = cli("runs", "show", run_id, "--json")
    assert shown.code == 0, shown.err[-2000:]
    summary = json.loads(shown.out)
    assert summary["schema_version"] == RunSummary.SCHEMA_VERSION
    levels = summary["cells"][0]["levels"]
    assert [level["concurrency"] for level in levels] == [1, 4]
    for level in levels:
        histogram = level["correct_drafts_histogram"]
        assert level["correct_drafts_requests"] == level["requests"] == 4
        # Every request's steps: prefill token plus (drafts + bonus) per step, less what
        # each last step ran past the length limit.
        steps = sum(histogram)
        drafts = sum(k * n for k, n in enumerate(histogram))
        overshoot = 4 * 1 + steps + drafts - level["output_tokens"]
        assert 0 <= overshoot < 4 * len(histogram)
        # Where acceptance drops: the first position fewer than half of the steps reached.
        reached = [sum(histogram[k:]) / steps for k in range(len(histogram) + 1)]
        position = level["accept_drop_position"]
        assert reached[position] < 0.5 <= reached[position - 1]
        assert 2 <= position <= 8  # about 4 drafts per step on budget 32
        low, mid, high = (level[f"accept_length_p{q}"] for q in (10, 50, 90))
        assert low <= mid <= high
        assert mid == pytest.approx(5.0, abs=1.0)
