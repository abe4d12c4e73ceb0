"""The simulator counts a text prompt as a large-vocabulary BPE tokenizer would, not by
characters: prose about one token a word, CJK about one per one or two characters."""

from __future__ import annotations

import math
import random

import pytest

from console.sim.text import count_tokens

# Pieces of the kinds a 150k byte-level BPE vocabulary (Qwen2's, Kimi's) holds, each one
# token. Issue 14 measured SGLang's bench_serving 128-token random-ids prompts at 32-62 by the
# old character count (len/4), so such a prompt decodes to about 128-250 characters: one or
# two per token. The mix below has that shape: single CJK characters and short words, kana
# and hangul, accented Latin, short English subwords, code symbols, and U+FFFD where a
# multi-byte character was cut between two tokens.
VOCAB_PIECES = (
    "的",
    "我们",
    "世",
    "时间",
    "の",
    "는",
    "하고",
    "\ufffd",
    "\ufffd",
    "é",
    "ó",
    " a",
    "ing",
    "er",
    " the",
    "();",
    " {",
    "x",
    "日本",
    "в",
)


def decoded_random_ids(count: int, seed: int) -> str:
    """Text as bench_serving's random-ids prompts are sent: token pieces decoded back to
    back (sglang 0.5.23 benchmark/datasets/random.py:145-163)."""
    rng = random.Random(seed)
    return "".join(rng.choice(VOCAB_PIECES) for _ in range(count))


@pytest.mark.parametrize("seed", range(5))
def test_decoded_random_ids_count_near_their_number(seed: int):
    text = decoded_random_ids(128, seed)
    assert 0.7 * 128 <= count_tokens(text) <= 1.4 * 128
    assert math.ceil(len(text) / 4) < 0.7 * 128  # what a character count would say


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("The quick brown fox jumps over the lazy dog.", 9, 11),
        ("你好世界，今天天气很好", 5, 9),
        ("Привет, как дела?", 4, 8),
        ("x", 1, 1),
        ("", 1, 1),
    ],
)
def test_known_texts(text: str, low: int, high: int):
    assert low <= count_tokens(text) <= high
