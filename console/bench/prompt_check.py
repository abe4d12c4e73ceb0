"""Whether the server counted each prompt as long as the ids sent: a tokenizer or chat
template that changes a token-id prompt's length (a BOS token added, ids re-tokenized)
makes every figure of the level about other prompts than the ones asked for."""

from __future__ import annotations

from collections.abc import Sequence

from console.bench.results import LevelSummary, RequestResult

PROMPT_LEN_TOLERANCE = 0.10
"""A prompt is off when the server's `prompt_tokens` differ from the ids sent by more than
this share of the ids sent."""


def prompt_len_counts(requests: Sequence[RequestResult]) -> tuple[int | None, int | None]:
    """(requests checked, requests off): the finished ones that sent ids and whose server
    counted `prompt_tokens`; (None, None) when there were none (text prompts)."""
    checked = [
        (r.input_len, r.prompt_tokens)
        for r in requests
        if not r.error and r.input_len and r.prompt_tokens is not None
    ]
    if not checked:
        return None, None
    off = sum(1 for sent, counted in checked if abs(counted - sent) > PROMPT_LEN_TOLERANCE * sent)
    return len(checked), off


def prompt_len_note(level: LevelSummary) -> str | None:
    """`5 of 40 prompts were counted by the server more than 10% off ...` when any was."""
    if not level.prompt_len_off:
        return None
    return (
        f"{level.prompt_len_off} of {level.prompt_len_checked} token-id prompts were counted by"
        f" the server (prompt_tokens) more than {PROMPT_LEN_TOLERANCE:.0%} off the ids sent:"
        " its tokenizer or template changes the prompts' length"
    )
