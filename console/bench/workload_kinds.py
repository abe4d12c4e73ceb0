"""Synthetic workloads shaped like production traffic: chat-like length distributions,
shared system prompts, and multi-turn conversations whose prefix grows turn by turn.

Every prompt is random token ids (exact lengths, no tokenizer), drawn from generators seeded
by the level's salt and the prompt's position, so a level's prompts are the same on every run
and any batch of them can be made without the ones before it. Pieces meant to be shared (a
system prompt, an earlier turn) are drawn from a generator keyed by what they are, so equal
pieces are identical ids and a server's prefix cache can reuse them.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from itertools import chain

from console.bench.workload import DEFAULT_VOCAB, MAX_TOKENS, Prompt, random_ids
from console.core.errors import UsageError


@dataclass(frozen=True)
class LogNormal:
    """A long-tailed token count: lognormal around `median`, clamped to [low, high]."""

    median: float
    sigma: float
    low: int = 1
    high: int = 32768

    def draw(self, rng: random.Random) -> int:
        value = rng.lognormvariate(math.log(self.median), self.sigma)
        return max(self.low, min(self.high, round(value)))

    def describe(self) -> dict[str, object]:
        return {"median": self.median, "sigma": self.sigma, "low": self.low, "high": self.high}


# Chat traffic: the medians are those the Splitwise paper reports for Azure's production
# conversation trace (Patel et al., ISCA 2024, section 3: 1020 prompt and 129 output tokens).
# The spreads are this project's choice, not a fit to raw data: sigma 1.0 puts p90 at ~3.6x
# the median (a long tail of pasted documents), 0.9 puts p90 of answers at ~3.2x.
CHAT_INPUT = LogNormal(median=1020, sigma=1.0, low=4, high=16384)
CHAT_OUTPUT = LogNormal(median=129, sigma=0.9, low=1, high=4096)


def _rng(*key: object) -> random.Random:
    return random.Random(":".join(str(part) for part in key))


def keyed_ids(vocab: int, count: int, *key: object) -> tuple[int, ...]:
    """`count` ids that depend only on `key`: the same piece is the same ids everywhere."""
    return random_ids(_rng(*key), count, vocab)


@dataclass(frozen=True)
class LengthDistribution:
    """Independent prompts whose lengths follow chat traffic (`CHAT_INPUT`, `CHAT_OUTPUT`)."""

    input: LogNormal = CHAT_INPUT
    output: LogNormal = CHAT_OUTPUT
    vocab_size: int = DEFAULT_VOCAB
    seed: int = 0
    name: str = "chat"
    timed: bool = False

    def validate(self, where: str = "") -> LengthDistribution:
        return self

    def prompts(self, salt: int, start: int, count: int) -> list[Prompt]:
        out = []
        for index in range(start, start + count):
            rng = _rng("chat", self.seed, salt, index)
            input_len = self.input.draw(rng)
            output_len = self.output.draw(rng)
            ids = random_ids(rng, input_len, self.vocab_size)
            out.append(Prompt(ids, None, input_len, output_len))
        return out

    def after(self, index: int) -> int | None:
        return None

    def describe(self) -> dict[str, object]:
        return {"kind": self.name, "input": self.input.describe(), "output": self.output.describe()}


@dataclass(frozen=True)
class SharedPrefix:
    """Requests in `groups` groups; each group's requests start with the same system prompt
    of `prefix_len` tokens, followed by a question of their own (chat-like lengths unless
    `question` says otherwise). Request i belongs to group i mod `groups`."""

    prefix_len: int = 2048
    groups: int = 4
    question: LogNormal = LogNormal(median=256, sigma=0.8, low=4, high=4096)
    output: LogNormal = CHAT_OUTPUT
    vocab_size: int = DEFAULT_VOCAB
    seed: int = 0
    name: str = "shared-prefix"
    timed: bool = False

    def validate(self, where: str = "") -> SharedPrefix:
        """Self; UsageError (prefixed by `where`, the flag and value) when a count is out of
        range: a prompt holds at most `MAX_TOKENS`."""
        where = where or self.name
        if self.prefix_len < 1 or self.groups < 1:
            raise UsageError(f"{where}: prefix_len and groups must be at least 1")
        longest = self.prefix_len + self.question.high
        if longest > MAX_TOKENS:
            raise UsageError(
                f"{where}: prefix_len {self.prefix_len} plus the longest question "
                f"({self.question.high}) is over {MAX_TOKENS} tokens; lower prefix_len"
            )
        return self

    def prompts(self, salt: int, start: int, count: int) -> list[Prompt]:
        prefixes: dict[int, tuple[int, ...]] = {}
        out = []
        for index in range(start, start + count):
            group = index % self.groups
            prefix = prefixes.get(group)
            if prefix is None:
                prefix = keyed_ids(self.vocab_size, self.prefix_len, "sys", self.seed, salt, group)
                prefixes[group] = prefix
            rng = _rng("question", self.seed, salt, index)
            asked = self.question.draw(rng)
            output_len = self.output.draw(rng)
            ids = prefix + random_ids(rng, asked, self.vocab_size)
            out.append(Prompt(ids, None, len(ids), output_len))
        return out

    def after(self, index: int) -> int | None:
        return None

    def describe(self) -> dict[str, object]:
        return {
            "kind": self.name,
            "prefix_len": self.prefix_len,
            "groups": self.groups,
            "question": self.question.describe(),
            "output": self.output.describe(),
        }


@dataclass(frozen=True)
class MultiTurn:
    """Conversations of `turns` turns over a system prompt of `system_len` tokens. Turn t's
    prompt is the system prompt, every earlier turn (the user's message, then an answer of
    that turn's output length, made up here since the server's real answer is not sent
    back), and turn t's new message: the shared prefix grows each turn, which SGLang's
    radix cache reuses.

    Prompts go round-robin over `conversations` conversations (request i is turn
    i div `conversations` of conversation i mod `conversations`); past `conversations` x
    `turns` requests new conversations begin. Turn t + 1 depends on turn t (`after`): the
    level runner sends it only once turn t has finished, as a user's next message follows
    the answer, and meanwhile sends whichever turn of another conversation is ready. So a
    conversation never has two turns in flight, and at most `conversations` requests of one
    round are in flight whatever the concurrency.
    """

    conversations: int = 8
    turns: int = 6
    system_len: int = 512
    message: LogNormal = LogNormal(median=128, sigma=0.8, low=4, high=2048)
    answer: LogNormal = LogNormal(median=192, sigma=0.7, low=8, high=2048)
    vocab_size: int = DEFAULT_VOCAB
    seed: int = 0
    name: str = "multi-turn"
    timed: bool = False

    def validate(self, where: str = "") -> MultiTurn:
        """Self; UsageError (prefixed by `where`, the flag and value) when a count is out of
        range: the last turn's prompt, at its longest, holds at most `MAX_TOKENS`."""
        where = where or self.name
        if self.conversations < 1 or self.turns < 1 or self.system_len < 0:
            raise UsageError(
                f"{where}: conversations and turns must be at least 1, system_len at least 0"
            )
        longest = (
            self.system_len + self.turns * self.message.high + (self.turns - 1) * self.answer.high
        )
        if longest > MAX_TOKENS:
            raise UsageError(
                f"{where}: the last of {self.turns} turns over a {self.system_len}-token system "
                f"prompt can reach {longest} tokens, over {MAX_TOKENS}; lower turns or "
                "system_len"
            )
        return self

    def turn_of(self, index: int) -> tuple[int, int]:
        """(conversation, turn) of request `index`."""
        round_size = self.conversations * self.turns
        block, within = divmod(index, round_size)
        turn, slot = divmod(within, self.conversations)
        return block * self.conversations + slot, turn

    def after(self, index: int) -> int | None:
        """The same conversation's previous turn: a user sends the next message only once
        the answer to the last one is in."""
        _, turn = self.turn_of(index)
        return index - self.conversations if turn > 0 else None

    def _lengths(self, salt: int, conversation: int, turn: int) -> tuple[int, int]:
        rng = _rng("turn", self.seed, salt, conversation, turn)
        return self.message.draw(rng), self.answer.draw(rng)

    def prompts(self, salt: int, start: int, count: int) -> list[Prompt]:
        out = []
        for index in range(start, start + count):
            conversation, turn = self.turn_of(index)
            key = (self.seed, salt, conversation)
            parts = [keyed_ids(self.vocab_size, self.system_len, "system", *key)]
            for earlier in range(turn):
                message, answer = self._lengths(salt, conversation, earlier)
                parts.append(keyed_ids(self.vocab_size, message, "user", *key, earlier))
                parts.append(keyed_ids(self.vocab_size, answer, "answer", *key, earlier))
            message, answer = self._lengths(salt, conversation, turn)
            parts.append(keyed_ids(self.vocab_size, message, "user", *key, turn))
            ids = tuple(chain.from_iterable(parts))
            out.append(Prompt(ids, None, len(ids), answer))
        return out

    def describe(self) -> dict[str, object]:
        return {
            "kind": self.name,
            "conversations": self.conversations,
            "turns": self.turns,
            "system_len": self.system_len,
            "message": self.message.describe(),
            "answer": self.answer.describe(),
        }
