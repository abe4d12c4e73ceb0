"""How long a benchmark or campaign will take, said before it starts ("about 40 min").

Pure arithmetic over the request (cells, levels, requests, lengths) and, where the caller
knows it, each cell's decode speed: a closed-loop level of N requests at concurrency c runs
ceil(N / c) rounds, each a prefill and `output_len / tokens_per_step` verify steps whose time
grows with the running batch. Without a speed the estimate gives the counts only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # The level runner pulls in httpx: a confirmation dialog only needs its fields.
    from console.bench.levels import LevelSpec
    from console.bench.request import BenchRequest, CampaignRequest, FindMaxKind
    from console.bench.results import CellSummary


@dataclass(frozen=True, slots=True, kw_only=True)
class CellSpeed:
    """How fast one cell's server decodes, in wall seconds."""

    step_s: float
    """One verify (decode) step for a single running request."""
    batch_alpha: float = 1.0
    """How much each extra running request lengthens a step (0: free batching)."""
    tokens_per_step: float = 1.0
    """Tokens committed per step (the acceptance length; 1 without speculation)."""
    prefill_tok_s: float | None = None
    """Prompt tokens prefilled per second (None: prefill not counted)."""
    ready_s: float = 0.0
    """From launch to ready (a campaign launches each cell's server)."""


Cell = tuple[str, str, str]
"""(profile, layout, variant)."""
SpeedOf = Callable[[Cell], CellSpeed | None]
"""A cell's speed where the caller knows it (a simulator's model, a past run), else None."""


@dataclass(frozen=True, slots=True)
class Estimate:
    cells: int
    levels: int
    requests: int
    """Measured requests over the whole run (warm-up requests not counted)."""
    seconds: float | None
    """Expected wall time; None when a cell's speed is unknown (or the run searches)."""
    searching: bool = False
    """A saturation search: `levels` is the most it can run, and the loads are not known
    ahead (so neither is the duration)."""

    def describe(self) -> str:
        """`12 cells × 2 levels × 16 requests, about 40 min`; `up to 12 levels (saturation
        search) × 16 requests` for a search."""
        parts = [_count(self.cells, "cell")] if self.cells != 1 else []
        per_level = self.requests // max(1, self.cells * self.levels)
        if self.searching:
            parts += [f"up to {self.levels} levels (saturation search)"]
            parts += [f"at least {_count(per_level, 'request')}"]
            text = " × ".join(parts)
            return f"{text}; the duration depends on the load where it saturates"
        parts += [_count(self.levels, "level"), _count(per_level, "request")]
        text = " × ".join(parts)
        if self.seconds is None:
            return f"{text}; duration unknown (no speed known for every cell)"
        return f"{text}, {about(self.seconds)}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def about(seconds: float) -> str:
    """`under a minute`, `about 7 min`, `about 2.5 h`."""
    if seconds < 45:
        return "under a minute"
    minutes = seconds / 60
    if minutes < 100:
        return f"about {max(1, round(minutes))} min"
    return f"about {minutes / 60:.1f} h"


def measured_speed(cell: CellSummary) -> CellSpeed | None:
    """A cell's speed as a finished run measured it: the step time and tokens per step at
    its lowest concurrency, and how the step grew with the batch at its highest (no
    batching gain assumed when it ran one concurrency). None without a measured level."""
    levels = sorted(
        (
            level
            for level in cell.levels
            if level.status == "done" and level.step_time_s and level.concurrency
        ),
        key=lambda level: level.concurrency or 1,
    )
    if not levels:
        return None
    low, high = levels[0], levels[-1]
    low_c, high_c = low.concurrency or 1, high.concurrency or 1
    low_step, high_step = low.step_time_s or 0.0, high.step_time_s or 0.0
    alpha = 1.0
    if high_c > low_c and low_step > 0:
        alpha = max(0.0, (high_step / low_step - 1.0) / (high_c - low_c))
    step_s = low_step / (1.0 + alpha * (low_c - 1))
    return CellSpeed(
        step_s=step_s,
        batch_alpha=alpha,
        tokens_per_step=low.accepted_tokens_per_step or 1.0,
    )


def step_seconds(speed: CellSpeed, batch: int) -> float:
    return speed.step_s * (1.0 + speed.batch_alpha * max(0, batch - 1))


def request_seconds(speed: CellSpeed, batch: int, input_len: int, output_len: int) -> float:
    """One request's prefill and decode while `batch` requests run together."""
    prefill = 0.0 if not speed.prefill_tok_s else batch * input_len / speed.prefill_tok_s
    steps = math.ceil(output_len / max(1.0, speed.tokens_per_step))
    return prefill + steps * step_seconds(speed, batch)


def level_seconds(speed: CellSpeed, level: LevelSpec, input_len: int, output_len: int) -> float:
    """A level's wall time: its warm-up requests, then its measured ones."""
    warmup = level.warmup * request_seconds(speed, 1, input_len, output_len)
    if level.duration_s is not None:
        return warmup + level.duration_s
    requests = level.requests or 0
    concurrency = max(1, level.concurrency or requests or 1)
    batch = min(concurrency, max(1, requests))
    closed = math.ceil(requests / batch) * request_seconds(speed, batch, input_len, output_len)
    if level.rate:
        # Open loop: arrivals spread over requests / rate, the last one still has to finish.
        closed = max(closed, requests / level.rate + request_seconds(speed, 1, input_len, 0))
    return warmup + closed


def _levels_total(levels: list[LevelSpec]) -> int:
    return sum(level.requests or 0 for level in levels)


def _search_levels(
    find_max: FindMaxKind | None, limit: float | None, levels: list[LevelSpec]
) -> tuple[int, int] | None:
    """The most levels a saturation search can run, and the requests of its first level
    (its smallest); None when the request does not search."""
    if find_max is None:
        return None
    from console.bench.find_max import max_levels
    from console.bench.search_levels import search_for, search_level

    search, template = search_for(find_max, limit, levels)
    first = search_level(search, template, 0, search.start)
    return max_levels(search), first.requests or 0


def _searching(cells: int, search: tuple[int, int]) -> Estimate:
    most, per_level = search
    return Estimate(cells, most, cells * most * per_level, None, searching=True)


def estimate_bench(request: BenchRequest, speed: CellSpeed | None) -> Estimate:
    levels = request.levels()
    search = _search_levels(request.find_max, request.find_max_limit, levels)
    if search is not None:
        return _searching(1, search)
    seconds = None
    if speed is not None:
        seconds = sum(
            level_seconds(speed, level, request.input_len, request.output_len) for level in levels
        )
    return Estimate(1, len(levels), _levels_total(levels), seconds)


def estimate_campaign(request: CampaignRequest, speed_of: SpeedOf) -> Estimate:
    spec = request.spec
    cells = [(c.profile, c.layout, c.variant) for c in spec.cell_list()]
    levels = request.levels()
    search = _search_levels(spec.find_max, spec.find_max_limit, levels)
    if search is not None:
        return _searching(len(cells), search)
    seconds: float | None = 0.0
    for cell in cells:
        speed = speed_of(cell)
        if speed is None or seconds is None:
            seconds = None
            continue
        seconds += speed.ready_s + sum(
            level_seconds(speed, level, spec.input_len, spec.output_len) for level in levels
        )
    return Estimate(len(cells), len(levels), len(cells) * _levels_total(levels), seconds)
