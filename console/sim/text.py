"""Deterministic output tokens (ids and words) and the JSON of streamed chunks.

A request's tokens are generated in blocks, as cumulative text and id strings with an offset
per token, so a chunk is two slices however long the request already is.
"""

from __future__ import annotations

import json
import math
import re

from console.sim.tokenizer import encoder

WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there one all we their can been has more if "
    "will would who so no when what up out about into than them some could time these two "
    "may then do first any my now such like our over man me even most made after also did "
    "many before must through back years where much your way well down should because each "
    "just those people how too little state good very make world still own see men work "
    "long get here between both life being under never day same another know while last "
    "might us great old year off come since against go came right used take three tokens "
    "speculative draft verify tree budget kernel tensor layer cache batch"
).split()
BLOCK = 64

# Pieces as the large-vocabulary byte-level BPE tokenizers of the simulated models split text
# before merging (the GPT-4 / Qwen2 pattern, letters written as [^\W\d_] for `re`):
# contractions, a word with at most one leading non-letter, digit groups, punctuation runs,
# whitespace.
# Letters include the combining marks that `re` leaves out of \w (Qwen3.5's split is
# [\p{L}\p{M}]+): diacritics, Hebrew/Arabic points, the Indic, Thai, Lao and Myanmar blocks.
_MARKS = "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed"
_MARKS += "\u0900-\u0dff\u0e00-\u0eff\u1000-\u109f\u3099\u309a"
_LETTER = rf"(?:[^\W\d_]|[{_MARKS}])"
_IS_MARK = re.compile(rf"[{_MARKS}]")
_PIECES = re.compile(
    rf"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\w{_MARKS}]?{_LETTER}+|\d{{1,3}}"
    rf"| ?[^\s\w{_MARKS}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+|_+"
)
_REPEATS = re.compile(r"(\S)\1{3,15}")
ASCII_LETTERS_PER_TOKEN = 7
OTHER_LETTERS_PER_TOKEN = 4
WIDE_CHARS_PER_TOKEN = 2
PUNCT_PER_TOKEN = 3


def _letter(char: str) -> bool:
    return char.isalpha() or _IS_MARK.match(char) is not None


def _wide(char: str) -> bool:
    """CJK ideographs, kana and hangul: a token holds one to three of them."""
    code = ord(char)
    return 0x2E80 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF


def _segments(word: str) -> list[str]:
    """A word cut where BPE pieces usually break: a lower-to-upper case change
    (`getHTTPResponse`)."""
    parts: list[str] = []
    start = 0
    for index in range(1, len(word)):
        if word[index].isupper() and word[index - 1].islower():
            parts.append(word[start:index])
            start = index
    parts.append(word[start:])
    return parts


def _word_tokens(word: str) -> int:
    tokens = 0
    for segment in _segments(word):
        wide = sum(1 for char in segment if _wide(char))
        rest = len(segment) - wide
        per = ASCII_LETTERS_PER_TOKEN if segment.isascii() else OTHER_LETTERS_PER_TOKEN
        tokens += math.ceil(wide / WIDE_CHARS_PER_TOKEN) + math.ceil(rest / per)
    return max(1, tokens)


def count_tokens(text: str, model_type: str | None = None) -> int:
    """How many tokens the simulated model's tokenizer makes of `text`: exactly, with the
    real tokenizer, for a model whose tokenizer ships on PyPI (Qwen3.5/3.6, see
    console/sim/tokenizer.py), else `estimate_tokens`."""
    count = encoder(model_type)
    return max(1, count(text)) if count is not None else estimate_tokens(text)


def estimate_tokens(text: str) -> int:
    """About how many tokens a large-vocabulary BPE tokenizer makes of `text`.

    A character count (len/4) holds for English prose only. SGLang's own bench_serving sends
    random token ids decoded to text (sglang 0.5.23 benchmark/datasets/random.py:145-163);
    from a 150k vocabulary that text is CJK, other scripts, code fragments and U+FFFD (a
    character cut between two tokens), one or two characters a token, which len/4 counted
    as a third to a half of the ids. So the count follows the tokenizer's pre-split: words
    by case segment and script (CJK about two characters a token), digits in groups of
    three, punctuation runs, each non-letter character outside ASCII on its own. An
    estimate, for models whose tokenizer is not available (Kimi's tiktoken vocabulary).
    """
    tokens = 0
    for piece in _PIECES.findall(text):
        core = piece.strip()
        if not core or core.isdigit():
            tokens += 1
        elif any(_letter(char) for char in core):
            lead = piece[0]
            tokens += 0 if lead.isspace() or lead.isalpha() or lead.isascii() else 1
            tokens += _word_tokens("".join(char for char in core if _letter(char)))
        else:
            # A run of one repeated character ("=====", "////") is one vocabulary entry.
            core = _REPEATS.sub(lambda run: run.group(1), core)
            other = sum(1 for char in core if not char.isascii())
            tokens += max(1, other + math.ceil((len(core) - other) / PUNCT_PER_TOKEN))
    return max(1, tokens)


class TokenStream:
    """The tokens of one request: `text` and `ids_text` plus end offsets after each token."""

    __slots__ = ("_next", "ids_ends", "ids_text", "text", "text_ends", "vocab")

    def __init__(self, seed: int, vocab: int) -> None:
        self._next = (seed * 2654435761 + 12345) % 2**32
        self.vocab = max(2, vocab)
        self.text = ""
        self.ids_text = ""
        self.text_ends: list[int] = [0]
        self.ids_ends: list[int] = [0]

    def ensure(self, count: int) -> None:
        """Make sure at least `count` tokens exist (generated a block at a time)."""
        have = len(self.text_ends) - 1
        if count <= have:
            return
        words = WORDS
        word_count = len(words)
        state = self._next
        vocab = self.vocab
        text_parts = [self.text]
        id_parts = [self.ids_text]
        text_end = len(self.text)
        ids_end = len(self.ids_text)
        text_ends = self.text_ends
        ids_ends = self.ids_ends
        for _ in range(max(BLOCK, count - have)):
            state = (state * 1103515245 + 12345) % 2**31
            token = state % vocab
            word = " " + words[token % word_count]
            token_text = str(token) if ids_end == 0 else "," + str(token)
            text_parts.append(word)
            id_parts.append(token_text)
            text_end += len(word)
            ids_end += len(token_text)
            text_ends.append(text_end)
            ids_ends.append(ids_end)
        self._next = state
        self.text = "".join(text_parts)
        self.ids_text = "".join(id_parts)

    def text_upto(self, count: int) -> str:
        return self.text[: self.text_ends[count]]

    def ids_upto(self, count: int) -> str:
        return self.ids_text[: self.ids_ends[count]]


def dumps(data: object) -> str:
    return json.dumps(data, separators=(",", ":"))
