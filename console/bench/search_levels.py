"""A saturation search's levels for one cell, read from what the run measured so far.

The driver (`find_max`) is given each finished level's load and verdict as the run's
summary computes them, so a `--resume` continues from `levels.jsonl` and the requests on
disk, with the same verdicts the tables show. Level indices continue 0, 1, 2, ...: the
next one is the first index without a finished level, so a level cut short by an interrupt
is measured again under its own index (and supersedes the cut one, as in a fixed sweep).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from console.bench.find_max import DEFAULT_LIMIT, DEFAULT_START, Search, SearchKind, next_load
from console.core.errors import UsageError

if TYPE_CHECKING:
    from console.bench.levels import LevelSpec
    from console.bench.results import LevelSummary


def level_load(search: Search, level: LevelSummary) -> float | None:
    """The level's load on the search's axis (None: a level of another kind)."""
    if search.kind == "rate":
        return level.rate
    if level.rate is not None or level.concurrency is None:
        return None
    return float(level.concurrency)


JUDGED = ("done", "failed")
"""Level statuses that are a verdict: a level whose every request failed carried nothing
(only an interrupted level is measured again)."""


def passed(level: LevelSummary) -> bool:
    """A finished level's verdict: it met the SLO at the attainment, and was not stopped
    early for clearly missing it. Nothing judged, or a failed level, is a failure."""
    return level.status == "done" and level.early_stop is None and level.slo_pass is True


def history(search: Search, levels: Iterable[LevelSummary]) -> dict[float, bool]:
    """Load -> verdict over the cell's judged levels; a load measured again keeps the
    verdict of its later level."""
    measured: dict[float, bool] = {}
    for level in sorted(levels, key=lambda lv: lv.level):
        load = level_load(search, level)
        if level.status in JUDGED and load is not None:
            measured[load] = passed(level)
    return measured


def search_level(search: Search, template: LevelSpec, index: int, load: float) -> LevelSpec:
    """The level measuring `load`: the template's request count, duration, warm-up and
    flush. A closed-loop level sends at least one request per stream, so it reaches its
    concurrency."""
    if search.kind == "rate":
        return replace(template, index=index, rate=load)
    streams = int(load)
    requests = template.requests
    if requests is not None:
        requests = max(requests, streams)
    return replace(template, index=index, concurrency=streams, rate=None, requests=requests)


def next_level(
    search: Search, template: LevelSpec, levels: Sequence[LevelSummary]
) -> LevelSpec | None:
    """The next level to run for a cell whose levels so far are `levels`; None when the
    search is done."""
    load = next_load(search, history(search, levels))
    if load is None:
        return None
    finished = {lv.level for lv in levels if lv.status in JUDGED}
    index = next(i for i in range(len(finished) + 1) if i not in finished)
    return search_level(search, template, index, load)


def search_for(
    kind: SearchKind, limit: float | None, levels: Sequence[LevelSpec]
) -> tuple[Search, LevelSpec]:
    """The search a request asks for, and the template of its levels: it starts at the
    lowest load the request lists (else 1 stream, or 1 request/s) and goes up to `limit`
    (else `DEFAULT_LIMIT`). A rate search keeps the first concurrency as its cap on
    requests in flight when it is above 1 (a cap of one would turn every rate into the same
    single stream). UsageError when the limit is below the start."""
    template = levels[0]
    if kind == "rate":
        rates = [lv.rate for lv in levels if lv.rate is not None]
        start = min(rates) if rates else DEFAULT_START["rate"]
        cap = template.concurrency if (template.concurrency or 0) > 1 else None
        template = replace(template, rate=start, concurrency=cap)
    else:
        counts = [lv.concurrency for lv in levels if lv.rate is None and lv.concurrency]
        start = float(min(counts)) if counts else DEFAULT_START["concurrency"]
        template = replace(template, concurrency=int(start), rate=None)
    top = DEFAULT_LIMIT[kind] if limit is None else limit
    if top < start:
        raise UsageError(
            f"--find-max-limit {top:g} is below the search's first {kind} {start:g}: give a"
            " higher limit or a lower first level"
        )
    if kind == "concurrency" and top < 1:
        raise UsageError("--find-max-limit must be at least 1 for a concurrency search")
    return Search(kind=kind, start=start, limit=top), template
