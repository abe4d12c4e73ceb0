"""What a benchmark sends: exact-length random token ids, or prompts from a file.

Random `input_ids` need no tokenizer: the length is exact and the ids stay below the model's
vocabulary. Files are JSONL (`{"prompt": ..., "output_len": ...}` per line) or ShareGPT JSON
(`[{"conversations": [{"from": "human", "value": ...}, ...]}]`). Other kinds (length
distributions, shared prefixes, multi-turn chats, trace replay) plug in as a `PromptSource`
(console.bench.workload_kinds, console.bench.workload_trace).
"""

from __future__ import annotations

import json
import random
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from console.core.errors import UsageError

DEFAULT_VOCAB = 32000
MAX_TOKENS = 2_000_000
"""The longest prompt a workload may make (a trace row's, a built-in kind's parameters)."""


@dataclass(frozen=True)
class Prompt:
    input_ids: tuple[int, ...] | None
    text: str | None
    input_len: int
    output_len: int
    at_s: float | None = None
    """When to send it, in the server's seconds from the level's start (trace replay); None
    for prompts sent as fast as the level's loop allows."""


class PromptSource(Protocol):
    """A workload kind besides random ids: prompts by position in a level's stream."""

    @property
    def name(self) -> str: ...

    @property
    def timed(self) -> bool:
        """True when prompts carry arrival times (`Prompt.at_s`) to be replayed."""
        ...

    def prompts(self, salt: int, start: int, count: int) -> list[Prompt]:
        """Prompts `start` .. `start + count - 1` of the stream keyed by `salt` (a level's
        index, or its warm-up's): the same salt gives the same prompts, and a timed source
        returns fewer (none) past its end."""
        ...

    def after(self, index: int) -> int | None:
        """The request that must have finished before request `index` is sent (the same
        conversation's previous turn), or None when it may go at any time."""
        ...

    def describe(self) -> dict[str, object]:
        """The kind and its parameters, for the run's `workload` record."""
        ...


@dataclass(frozen=True)
class Workload:
    input_len: int = 512
    output_len: int = 256
    range_ratio: float = 1.0
    """Lengths drawn uniformly from [len * ratio, len]; 1.0 means fixed lengths."""
    vocab_size: int = DEFAULT_VOCAB
    seed: int = 0
    dataset: Path | None = None
    prompts_from_file: tuple[Prompt, ...] = field(default_factory=tuple)
    source: PromptSource | None = None
    """Another kind of workload (console.bench.workload_kinds, workload_trace); when set,
    the level runner asks it for prompts instead."""

    @property
    def timed(self) -> bool:
        """Whether the prompts carry arrival times the level must replay."""
        return self.source is not None and self.source.timed

    def validate(self) -> Workload:
        if self.input_len < 1 or self.output_len < 1:
            raise UsageError("--input-len and --output-len must be at least 1")
        if not 0.0 < self.range_ratio <= 1.0:
            raise UsageError("--range-ratio must be in (0, 1]")
        if self.vocab_size < 2:
            raise UsageError("vocabulary size must be at least 2")
        return self

    def prompts(self, count: int, level: int) -> list[Prompt]:
        """`count` prompts for one level, the same for the same seed and level."""
        rng = random.Random(f"{self.seed}:{level}")
        if self.prompts_from_file:
            pool = self.prompts_from_file
            return [pool[(level * count + i) % len(pool)] for i in range(count)]
        prompts = []
        low_in = max(1, int(self.input_len * self.range_ratio))
        low_out = max(1, int(self.output_len * self.range_ratio))
        for _ in range(count):
            input_len = rng.randint(low_in, self.input_len)
            output_len = rng.randint(low_out, self.output_len)
            ids = random_ids(rng, input_len, self.vocab_size)
            prompts.append(Prompt(ids, None, input_len, output_len))
        return prompts


def random_ids(rng: random.Random, count: int, vocab: int) -> tuple[int, ...]:
    """`count` token ids in [1, vocab) from the seeded generator (bulk bytes, not a loop)."""
    code, width = ("H", 2) if vocab <= 65536 else ("I", 4)
    raw = array(code, rng.randbytes(width * count))
    span = vocab - 1
    return tuple(1 + value % span for value in raw)


def load_dataset(path: Path, output_len: int) -> tuple[Prompt, ...]:
    """Prompts from a JSONL file or a ShareGPT-format JSON file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--dataset {path}: {exc.strerror or exc}") from None
    prompts: list[Prompt] = []
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"--dataset {path}: not valid JSON ({exc})") from None
        for row in rows if isinstance(rows, list) else []:
            turns = row.get("conversations") if isinstance(row, dict) else None
            if not isinstance(turns, list) or not turns:
                continue
            first = turns[0]
            if isinstance(first, dict) and isinstance(first.get("value"), str):
                prompts.append(_text_prompt(first["value"], output_len))
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise UsageError(f"--dataset {path}: line {number} is not JSON") from None
            prompt = row.get("prompt") if isinstance(row, dict) else None
            if not isinstance(prompt, str):
                raise UsageError(f'--dataset {path}: line {number} has no "prompt" string')
            length = row.get("output_len", output_len)
            prompts.append(
                _text_prompt(prompt, int(length) if isinstance(length, int) else output_len)
            )
    if not prompts:
        raise UsageError(
            f'--dataset {path}: no prompts found (JSONL with "prompt" or ShareGPT JSON expected)'
        )
    return tuple(prompts)


def _text_prompt(text: str, output_len: int) -> Prompt:
    return Prompt(None, text, max(1, len(text) // 4), output_len)
