"""The simulated radix cache: which leading tokens of a prompt a DP rank already holds.

SGLang matches a prompt against its radix tree token by token, at most `input_len - 1`
tokens so one is always computed (sglang 0.5.23 srt/managers/schedule_batch.py:1766-1785),
inserts a prefilled prompt so later requests reuse it, evicts least-recently-used leaves when
the KV pool needs room, and `/flush_cache` resets the tree (srt/managers/scheduler.py:
5518-5524). Here the tree is a chain of hashed blocks of `BLOCK` tokens (a block's key hashes
its ids and its parent's key), kept in LRU order: cheap on the per-request path, and exact
to within one block (the match is whole blocks, where SGLang's default page size of 1 also
matches the tokens of a partly shared block). Text prompts are cut into blocks of
`TEXT_BLOCK_CHARS` characters, each worth its share of the prompt's token count.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

BLOCK = 16
"""Token ids per hashed block."""
TEXT_BLOCK_CHARS = 64


@dataclass(frozen=True, slots=True)
class PrefixKeys:
    """A prompt's block keys, in order, and how many tokens each block stands for."""

    keys: tuple[int, ...] = ()
    block_tokens: float = BLOCK

    def tokens(self, blocks: int, input_len: int) -> int:
        """Tokens in the first `blocks` blocks, within what SGLang may match."""
        return max(0, min(input_len - 1, int(blocks * self.block_tokens)))


NO_KEYS = PrefixKeys()


def id_keys(ids: Sequence[int]) -> PrefixKeys:
    """Keys of a prompt given as token ids (whole blocks only)."""
    keys = []
    parent = 0
    for start in range(0, len(ids) - BLOCK + 1, BLOCK):
        parent = hash((parent, *ids[start : start + BLOCK]))
        keys.append(parent)
    return PrefixKeys(tuple(keys), BLOCK)


def text_keys(text: str, input_len: int) -> PrefixKeys:
    """Keys of a text prompt: blocks of characters, each worth its share of the tokens."""
    if not text:
        return NO_KEYS
    keys = []
    parent = 0
    for start in range(0, len(text) - TEXT_BLOCK_CHARS + 1, TEXT_BLOCK_CHARS):
        parent = hash((parent, text[start : start + TEXT_BLOCK_CHARS]))
        keys.append(parent)
    return PrefixKeys(tuple(keys), TEXT_BLOCK_CHARS * input_len / len(text))


class PrefixCache:
    """One DP rank's cached blocks, oldest first. A block is always more recent than its
    descendants (a lookup touches a path leaf first), so the oldest block is a leaf and
    evicting from the front never strands a child."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._blocks: OrderedDict[int, float] = OrderedDict()
        self.tokens = 0.0
        """Tokens the cached blocks hold."""

    def __len__(self) -> int:
        return len(self._blocks)

    def match(self, prefix: PrefixKeys) -> int:
        """How many leading blocks of `prefix` are cached (touched as used)."""
        if not self.enabled:
            return 0
        blocks = self._blocks
        matched = 0
        for key in prefix.keys:
            if key not in blocks:
                break
            matched += 1
        for key in reversed(prefix.keys[:matched]):
            blocks.move_to_end(key)
        return matched

    def insert(self, prefix: PrefixKeys, room_tokens: float) -> None:
        """Cache every block of `prefix`, then evict the least recently used blocks until
        the cache holds at most `room_tokens` tokens (what the KV pool has beside the
        running requests)."""
        if not self.enabled:
            return
        blocks = self._blocks
        weight = prefix.block_tokens
        for key in reversed(prefix.keys):
            if key in blocks:
                blocks.move_to_end(key)
            else:
                blocks[key] = weight
                self.tokens += weight
        while blocks and self.tokens > room_tokens:
            _, dropped = blocks.popitem(last=False)
            self.tokens -= dropped

    def clear(self) -> None:
        self._blocks.clear()
        self.tokens = 0.0
