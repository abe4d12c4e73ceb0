"""The acceptance distribution of speculative decoding: SGLang's per-request histograms of
accepted drafts per verify step, summed per level, and what they say (pure).

A histogram `h` is SGLang's `spec_correct_drafts_histogram`: `h[k]` counts the verify steps
that accepted exactly `k` draft tokens, the bonus token not counted, and the list ends at the
largest `k` seen (sglang 0.5.23 srt/managers/schedule_batch.py:1566-1572). So `sum(h)` is the
request's `spec_verify_ct` and `sum(k * h[k])` its `spec_num_correct_drafts`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DROP_SHARE = 0.5
"""Acceptance drops at the first draft position accepted in fewer than this share of steps."""


def sum_histograms(histograms: Iterable[Sequence[int] | None]) -> tuple[int, ...] | None:
    """The histograms added index by index; None when there is none."""
    total: list[int] = []
    seen = False
    for histogram in histograms:
        if histogram is None:
            continue
        seen = True
        if len(histogram) > len(total):
            total.extend([0] * (len(histogram) - len(total)))
        for index, count in enumerate(histogram):
            total[index] += count
    return tuple(total) if seen and sum(total) > 0 else None


def survival(histogram: Sequence[int]) -> tuple[float, ...]:
    """`P(accepted drafts >= k)` for k = 0 .. len(histogram): the share of verify steps in
    which draft position k (1-based) was accepted; 1.0 at k = 0, 0.0 past the end."""
    steps = sum(histogram)
    if steps <= 0:
        return ()
    out = []
    remaining = steps
    for count in histogram:
        out.append(remaining / steps)
        remaining -= count
    out.append(0.0)
    return tuple(out)


def drop_position(histogram: Sequence[int]) -> int | None:
    """The first draft position (1-based) that fewer than half of the verify steps accepted:
    the smallest k >= 1 with `P(accepted drafts >= k) < 0.5`. A drafter that always lands
    its whole draft of n tokens gives n + 1; one that is usually rejected at once gives 1."""
    shares = survival(histogram)
    for position, share in enumerate(shares):
        if position >= 1 and share < DROP_SHARE:
            return position
    return None


def mean_accepted(histogram: Sequence[int]) -> float | None:
    """Mean drafts accepted per verify step (add 1 for the bonus token)."""
    steps = sum(histogram)
    if steps <= 0:
        return None
    return math.fsum(k * count for k, count in enumerate(histogram)) / steps


@dataclass(frozen=True, slots=True)
class HistogramRow:
    """One row of a shown histogram: the drafts accepted (`first` .. `last`) and the steps."""

    first: int
    last: int
    steps: int
    share: float
    """Of all the level's verify steps."""

    @property
    def label(self) -> str:
        return str(self.first) if self.first == self.last else f"{self.first}-{self.last}"


def histogram_rows(histogram: Sequence[int], max_rows: int = 10) -> list[HistogramRow]:
    """The histogram as at most `max_rows` rows: a leading run of empty counts in one row,
    the rest in equal bins of consecutive draft counts when there are too many for a row
    each (a DDTree budget of 64 has 65)."""
    steps = sum(histogram)
    if steps <= 0 or max_rows < 1:
        return []
    first_seen = next(k for k, count in enumerate(histogram) if count)
    rows: list[HistogramRow] = []
    if first_seen > 0 and max_rows > 1:
        rows.append(HistogramRow(0, first_seen - 1, 0, 0.0))
        max_rows -= 1
    else:
        first_seen = 0
    span = len(histogram) - first_seen
    width = math.ceil(span / max_rows)
    for start in range(first_seen, len(histogram), width):
        end = min(start + width, len(histogram)) - 1
        count = sum(histogram[start : end + 1])
        rows.append(HistogramRow(start, end, count, count / steps))
    return rows


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(histogram: Sequence[int], width: int = 16) -> str:
    """The histogram in one line of at most `width` block characters, each bin's summed
    counts against the largest bin's (`▂▅█▆▃`): for a live line where rows do not fit."""
    steps = sum(histogram)
    if steps <= 0 or width < 1:
        return ""
    size = math.ceil(len(histogram) / width)
    bins = [sum(histogram[i : i + size]) for i in range(0, len(histogram), size)]
    top = max(bins)
    return "".join(
        SPARK[min(len(SPARK) - 1, round(b / top * (len(SPARK) - 1)))] if b else " " for b in bins
    )
