"""Deterministic output tokens (ids and words) and the JSON of streamed chunks.

A request's tokens are generated in blocks, as cumulative text and id strings with an offset
per token, so a chunk is two slices however long the request already is.
"""

from __future__ import annotations

import json

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
