"""The simulator reproduces the reference box (DESIGN 1), measured as a client would.

Times each request on the simulator's own clock (its `/sim/stats` record of arrival, first
token and finish, in simulated seconds), so a loaded machine's client-side scheduling noise
never enters the figures. A lone request runs on the virtual clock (`--sim-speed 0`), where
its figures are the model's exactly; concurrent streams need real time (10x, Kimi's 4x).
The reference table's measured columns are output tok/s and accepted tokens per step; its
step-time column was an estimate that could not hold with them (5 / 0.080 s = 62.5 tok/s,
not the measured 92). The simulator is calibrated to the measured two and the step is
derived: 86.5, 54.3 and 62.2 ms for budgets 15, 32 and 64 (issue 19).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import httpx
import pytest

from tests.simproc import KIMI, QWEN, SMALL, running_sim

# Each test streams seconds of simulated load through its own simulator (the Qwen variants'
# shared fixture about 11 s, the Kimi sweep about 18 s): `-m "not slow"` leaves them out, the
# default run keeps them.
pytestmark = pytest.mark.slow

SPEED = 10.0
VIRTUAL = 0.0
DFLASH_DRAFT = [
    "--speculative-draft-model-path",
    "z-lab/Qwen3.6-27B-DFlash",
    "--max-running-requests",
    "32",
]


def ddtree(budget: int) -> list[str]:
    return [
        "--speculative-algorithm",
        "DDTREE",
        "--speculative-ddtree-budget",
        str(budget),
        *DFLASH_DRAFT,
    ]


def sim_records(url: str, rids: set[str]) -> list[dict]:
    """The simulator's ground-truth records of these requests, timed in simulated seconds."""
    stats = httpx.get(f"{url}/sim/stats", timeout=30).json()
    records = [r for r in stats["requests"] if r["rid"] in rids]
    assert len(records) == len(rids), (rids, [r["rid"] for r in stats["requests"]])
    return records


def one_request(
    url: str, input_len: int, output_len: int, seed: int = 0, *, virtual: bool = False
) -> dict:
    """Stream one request as a client would; its times come from the simulator's clock.
    `virtual`: the simulator runs at `--sim-speed 0`, where a response is written only every
    64 steps, so the engine's first token stands for the first chunk sent."""
    final = None
    body = {
        "input_ids": [(seed + i) % 1000 for i in range(input_len)],
        "stream": True,
        "sampling_params": {"max_new_tokens": output_len, "ignore_eos": True},
    }
    with (
        httpx.Client(timeout=120) as client,
        client.stream("POST", f"{url}/generate", json=body) as response,
    ):
        for line in response.iter_lines():
            if line.startswith("data: {"):
                final = json.loads(line[6:])
    assert final is not None
    meta = final["meta_info"]
    (record,) = sim_records(url, {meta["id"]})
    e2e = record["e2e_s"]
    ttft = record["ttft_engine_s"] if virtual else record["ttft_s"]
    steps = meta.get("spec_verify_ct") or meta["completion_tokens"] - 1
    return {
        "tokens": meta["completion_tokens"],
        "tok_s": meta["completion_tokens"] / e2e,
        "decode_tok_s": meta["completion_tokens"] / (e2e - ttft),
        "accept": meta.get("spec_accept_length", 1.0),
        "step_s": (e2e - ttft) / steps,
        "ids": final["output_ids"],
        "verify_ct": meta.get("spec_verify_ct"),
    }


def concurrent_tok_s(url: str, concurrency: int, input_len: int, output_len: int) -> float:
    """Aggregate output tokens per simulated second of `concurrency` simultaneous streams,
    from the first arrival to the last finish on the simulator's clock."""

    async def one(session: aiohttp.ClientSession, seed: int) -> tuple[str, int]:
        body = {
            "input_ids": [(seed + i) % 1000 for i in range(input_len)],
            "stream": True,
            "sampling_params": {"max_new_tokens": output_len, "ignore_eos": True},
        }
        meta: dict = {}
        async with session.post(f"{url}/generate", json=body) as response:
            async for line in response.content:
                if line.startswith(b"data: {"):
                    meta = json.loads(line[6:])["meta_info"]
        return str(meta["id"]), int(meta["completion_tokens"])

    async def run() -> list[tuple[str, int]]:
        async with aiohttp.ClientSession() as session:
            await one(session, 0)  # warm up
            return await asyncio.gather(*(one(session, i) for i in range(concurrency)))

    finished = asyncio.run(run())
    records = sim_records(url, {rid for rid, _ in finished})
    span = max(r["finished_s"] for r in records) - min(r["arrival_s"] for r in records)
    return sum(tokens for _, tokens in finished) / span


@pytest.fixture(scope="module")
def qwen_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    runs = {}
    variants = {
        "off": [],
        "ddtree-b15": ddtree(15),
        "ddtree-b32": ddtree(32),
        "ddtree-b64": ddtree(64),
    }
    for name, extra in variants.items():
        # On the virtual clock: a lone request's figures are the model's exactly (a busy box
        # put budget 15 at 155 tok/s against 173.4 on the wall clock at 10x).
        with running_sim([*QWEN, *extra], tmp_path_factory.mktemp(name), speed=VIRTUAL) as sim:
            output = 256 if name == "off" else 1024
            runs[name] = one_request(sim.url, 512, output, virtual=True)
    return runs


def within(value: float, target: float, tolerance: float = 0.10) -> bool:
    return abs(value - target) <= tolerance * target


def test_qwen_autoregressive_single_stream(qwen_runs):
    off = qwen_runs["off"]
    assert within(off["tok_s"], 26.7), off["tok_s"]
    assert within(off["step_s"], 0.037), off["step_s"]
    assert off["accept"] == 1.0


@pytest.mark.parametrize(
    ("variant", "accept", "step_s"),
    [
        ("ddtree-b15", 15.0, 0.0865),
        ("ddtree-b32", 5.0, 0.0543),
        ("ddtree-b64", 4.0, 0.0622),
    ],
)
def test_qwen_ddtree_acceptance_and_step_time(qwen_runs, variant, accept, step_s):
    run = qwen_runs[variant]
    assert within(run["accept"], accept), run["accept"]
    assert within(run["step_s"], step_s), run["step_s"]
    # Decode throughput is what a step commits over what it costs. The TTFT is left out: a
    # loaded machine's event-loop lag lands in it, ten times over on the simulated clock.
    assert within(run["decode_tok_s"], run["accept"] / run["step_s"], 0.05)


def test_qwen_ddtree_b15_speedup_and_ordering(qwen_runs):
    b15 = qwen_runs["ddtree-b15"]
    assert within(b15["tok_s"], 173.4), b15["tok_s"]
    speedup = b15["tok_s"] / qwen_runs["off"]["tok_s"]
    assert within(speedup, 6.5), speedup
    b32, b64 = qwen_runs["ddtree-b32"], qwen_runs["ddtree-b64"]
    assert b15["tok_s"] > b32["tok_s"] > b64["tok_s"]
    # The measured tok/s of the wider trees (1024 tokens: the prefill is ~1% of the time).
    assert within(b32["tok_s"], 92.0), b32["tok_s"]
    assert within(b64["tok_s"], 64.3), b64["tok_s"]
    # Acceptance collapses while the step stays below the smallest budget's: the hybrid-GDN
    # signature. The step is not monotonic (54 -> 62 ms), as measured.
    assert b32["step_s"] < b15["step_s"]
    assert b32["step_s"] < b64["step_s"] < b15["step_s"]


def test_kimi_scales_near_linearly_to_807(tmp_path: Path):
    with running_sim(KIMI, tmp_path, speed=4) as sim:
        rates = {c: concurrent_tok_s(sim.url, c, 512, 256) for c in (1, 8, 32)}
    assert within(rates[32], 807.5), rates
    assert within(rates[1], 807.5 / 32, 0.15), rates
    assert rates[32] / rates[1] > 25, rates
    assert rates[1] < rates[8] < rates[32]


def test_qwen_stays_nearly_flat(tmp_path: Path):
    with running_sim(QWEN, tmp_path, speed=SPEED) as sim:
        single = concurrent_tok_s(sim.url, 1, 512, 64)
        many = concurrent_tok_s(sim.url, 16, 512, 64)
    assert many / single < 1.6, (single, many)


def test_attention_ddtree_acceptance_rises_speedup_peaks_in_the_middle(tmp_path: Path):
    runs = {}
    for budget in (15, 32, 64):
        # On the virtual clock (`--sim-speed 0`): budgets 15 and 32 are 6% apart in tok/s, which
        # a busy box's wall-clock lag flipped even at 2x; one request has nothing to batch
        # with, so its figures on the virtual clock are the model's exactly.
        with running_sim([*SMALL, *ddtree(budget)], tmp_path, speed=VIRTUAL) as sim:
            runs[budget] = one_request(sim.url, 128, 512, virtual=True)
    accepts = [runs[b]["accept"] for b in (15, 32, 64)]
    assert accepts == sorted(accepts), accepts
    assert runs[32]["tok_s"] > runs[15]["tok_s"]
    assert runs[32]["tok_s"] > runs[64]["tok_s"]


def test_same_seed_same_run_other_seed_differs(tmp_path: Path):
    def sample(seed: int) -> list[tuple]:
        with running_sim([*QWEN, *ddtree(32), "--sim-seed", str(seed)], tmp_path, speed=50) as sim:
            return [
                (r["verify_ct"], tuple(r["ids"]))
                for r in (one_request(sim.url, 64, 128, seed=i) for i in range(3))
            ]

    first = sample(7)
    assert sample(7) == first
    assert sample(8) != first
