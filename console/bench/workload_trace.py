"""Trace replay: requests at the times, and of the lengths, a recorded trace says.

Two JSONL formats, told apart by their fields:

- this project's: `{"timestamp": <seconds>, "input_len": N, "output_len": M}` with optional
  `"prefix_group": <name>` and `"prefix_len": P` (default 512): rows of one group start with
  the same P tokens (the shortest P where rows disagree), as requests sharing a system prompt;
- Mooncake's (FAST'25 traces, github.com/kvcache-ai/Mooncake): `{"timestamp": <ms>,
  "input_length": N, "output_length": M, "hash_ids": [...]}`, each hash id one 512-token
  block: equal hash ids are identical token blocks, so the prefix sharing of the original
  traffic is real for the server's cache.

Timestamps must not decrease; the first row is time 0. Token ids are random, keyed by the
level's salt and the group or block they belong to, so two levels do not share a cache.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from pathlib import Path

from console.bench.workload import DEFAULT_VOCAB, MAX_TOKENS, Prompt
from console.bench.workload_kinds import keyed_ids
from console.core.errors import UsageError

MOONCAKE_BLOCK = 512
"""Tokens per Mooncake hash id."""
DEFAULT_PREFIX_LEN = 512
MAX_TRACE_BYTES = 256 * 1024 * 1024
PIECE_CACHE_TOKENS = 1 << 20
"""A replay keeps about this many ids of shared blocks and prefixes for its next prompts."""


@dataclass(frozen=True)
class TraceRow:
    at_s: float
    """Seconds after the trace's first row."""
    input_len: int
    output_len: int
    group: str | None = None
    prefix_len: int = 0
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Trace:
    path: str
    format: str
    """`jsonl` (this project's) or `mooncake`."""
    rows: tuple[TraceRow, ...]

    @cached_property
    def group_prefix_len(self) -> dict[str, int]:
        """Each prefix group's longest shared prefix (shorter ones are its beginning)."""
        longest: dict[str, int] = {}
        for row in self.rows:
            if row.group is not None:
                longest[row.group] = max(longest.get(row.group, 0), row.prefix_len)
        return longest

    @property
    def span_s(self) -> float:
        return self.rows[-1].at_s if self.rows else 0.0

    @property
    def mean_rate(self) -> float:
        """Requests per second over the trace (0 for a single instant)."""
        return (len(self.rows) - 1) / self.span_s if self.span_s > 0 else 0.0


class PieceCache:
    """Token ids by key, least recently used dropped first once they hold more than
    `PIECE_CACHE_TOKENS` ids."""

    def __init__(self, limit: int = PIECE_CACHE_TOKENS) -> None:
        self.limit = limit
        self.tokens = 0
        self._ids: OrderedDict[Hashable, tuple[int, ...]] = OrderedDict()

    def get(self, key: Hashable, make: Callable[[], tuple[int, ...]]) -> tuple[int, ...]:
        ids = self._ids.get(key)
        if ids is not None:
            self._ids.move_to_end(key)
            return ids
        ids = make()
        self._ids[key] = ids
        self.tokens += len(ids)
        while self.tokens > self.limit and len(self._ids) > 1:
            _, dropped = self._ids.popitem(last=False)
            self.tokens -= len(dropped)
        return ids

    def __len__(self) -> int:
        return len(self._ids)


@dataclass(frozen=True)
class TraceReplay:
    """A trace as a timed prompt source: prompt i is row i, `at_s` its time."""

    trace: Trace
    vocab_size: int = DEFAULT_VOCAB
    seed: int = 0
    name: str = "trace"
    timed: bool = True
    _pieces: PieceCache = field(default_factory=PieceCache, init=False, repr=False, compare=False)
    """Shared pieces made so far: a trace's rows repeat their blocks and group prefixes, and
    a replay makes its prompts one at a time, so each is drawn once rather than once per row
    (about 9 ms for a 60k-token prompt)."""

    def __len__(self) -> int:
        return len(self.trace.rows)

    def _piece(self, salt: int, kind: str, key: str | int, length: int) -> tuple[int, ...]:
        """The ids of a shared block or group prefix, from the cache or drawn."""
        return self._pieces.get(
            (salt, kind, key),
            lambda: keyed_ids(self.vocab_size, length, kind, self.seed, salt, key),
        )

    def prompts(self, salt: int, start: int, count: int) -> list[Prompt]:
        rows = self.trace.rows[start : start + count]
        longest = self.trace.group_prefix_len
        out = []
        for offset, row in enumerate(rows):
            index = start + offset
            if row.hash_ids:
                parts = [
                    self._piece(salt, "block", block, MOONCAKE_BLOCK) for block in row.hash_ids
                ]
                shared: tuple[int, ...] = tuple(chain.from_iterable(parts))[: row.input_len]
            elif row.group is not None:
                prefix = self._piece(salt, "group", row.group, longest[row.group])
                shared = prefix[: min(row.prefix_len, row.input_len)]
            else:
                shared = ()
            rest = row.input_len - len(shared)
            own = (
                keyed_ids(self.vocab_size, rest, "row", self.seed, salt, index) if rest > 0 else ()
            )
            out.append(Prompt(shared + own, None, row.input_len, row.output_len, row.at_s))
        return out

    def after(self, index: int) -> int | None:
        return None

    def describe(self) -> dict[str, object]:
        return {
            "kind": self.name,
            "path": self.trace.path,
            "format": self.trace.format,
            "requests": len(self.trace.rows),
            "span_s": self.trace.span_s,
        }


def load_trace(path: Path, label: str = "--trace") -> Trace:
    """A trace file; UsageError naming the file, the line and the field when it is wrong."""
    where = f"{label} {path}"
    try:
        size = path.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise UsageError(f"{where}: {size} bytes is over the {MAX_TRACE_BYTES} byte limit")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{where}: not UTF-8 text") from None
    rows: list[TraceRow] = []
    fmt: str | None = None
    first_ts = 0.0
    last_ts: float | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        at = f"{where}: line {number}"
        try:
            row = json.loads(line)
        except ValueError:
            raise UsageError(f"{at}: not a JSON object") from None
        if not isinstance(row, dict):
            raise UsageError(f"{at}: not a JSON object")
        kind = "mooncake" if "input_length" in row or "hash_ids" in row else "jsonl"
        if fmt is None:
            fmt = kind
        elif kind != fmt:
            raise UsageError(
                f"{at}: a {kind} row in a {fmt} trace (Mooncake rows have input_length and "
                "hash_ids; this project's have input_len)"
            )
        parsed = _mooncake_row(row, at) if kind == "mooncake" else _jsonl_row(row, at)
        stamp, values = parsed
        if last_ts is None:
            first_ts = stamp
        elif stamp < last_ts:
            raise UsageError(
                f'{at}: "timestamp" {stamp:g} is earlier than the line before ({last_ts:g}); '
                "a trace's timestamps must not decrease"
            )
        last_ts = stamp
        rows.append(TraceRow(stamp - first_ts, *values))
    if not rows:
        raise UsageError(f"{where}: no requests in the file")
    scale = 1000.0 if fmt == "mooncake" else 1.0
    if scale != 1.0:
        rows = [
            TraceRow(r.at_s / scale, r.input_len, r.output_len, r.group, r.prefix_len, r.hash_ids)
            for r in rows
        ]
    return Trace(str(path), fmt or "jsonl", tuple(rows))


def _number(row: dict[str, object], field: str, at: str) -> float:
    value = row.get(field)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UsageError(f'{at}: "{field}" must be a number, not {value!r}')
    if value < 0:
        raise UsageError(f'{at}: "{field}" cannot be negative ({value!r})')
    return float(value)


def _count(row: dict[str, object], field: str, at: str, default: int | None = None) -> int:
    value = row.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise UsageError(f'{at}: "{field}" must be a whole number from 1 to {MAX_TOKENS}')
    return value


def _jsonl_row(
    row: dict[str, object], at: str
) -> tuple[float, tuple[int, int, str | None, int, tuple[int, ...]]]:
    stamp = _number(row, "timestamp", at)
    input_len = _count(row, "input_len", at)
    output_len = _count(row, "output_len", at)
    group = row.get("prefix_group")
    if group is not None and (isinstance(group, bool) or not isinstance(group, str | int)):
        raise UsageError(f'{at}: "prefix_group" must be a name or a number, not {group!r}')
    prefix_len = _count(row, "prefix_len", at, DEFAULT_PREFIX_LEN) if group is not None else 0
    name = str(group) if group is not None else None
    return stamp, (input_len, output_len, name, prefix_len, ())


def _mooncake_row(
    row: dict[str, object], at: str
) -> tuple[float, tuple[int, int, str | None, int, tuple[int, ...]]]:
    stamp = _number(row, "timestamp", at)
    input_len = _count(row, "input_length", at)
    output_len = _count(row, "output_length", at)
    hashes = row.get("hash_ids", [])
    if not isinstance(hashes, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in hashes
    ):
        raise UsageError(f'{at}: "hash_ids" must be a list of whole numbers')
    return stamp, (input_len, output_len, None, 0, tuple(hashes))
