"""A saturation search's levels for one cell, read from what the run measured so far.

The driver (`find_max`) is given each finished level's load and verdict as the run's
summary computes them, so a `--resume` continues from `levels.jsonl` and the requests on
disk, with the same verdicts the tables show. Level indices continue 0, 1, 2, ...: the
next one is the first index without a finished level, so a level cut short by an interrupt
is measured again under its own index (and supersedes the cut one, as in a fixed sweep).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from console.bench.find_max import (
    DEFAULT_LIMIT,
    DEFAULT_START,
    PACE_SHARE,
    Search,
    SearchKind,
    next_load,
)
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


RATE_LEVEL_S = 30.0
"""Server seconds of arrivals a rate level sends at least. An open loop above the server's
capacity builds its queue linearly with time: a short burst never waits long enough to
miss a TTFT target, and the pace check needs a window many E2Es long (its boundary noise
is about sqrt(2 x rate x E2E) requests). Thirty seconds is ten E2Es of a 3 s request."""
RATE_LEVEL_E2ES = 10.0
"""...and at least this many of the slowest median E2E measured at the search's earlier
levels that passed, so a workload of long answers still gets a window many E2Es long."""
STEADY_PER_STREAM = 3
STEADY_EXTRA = 3
"""A concurrency level sends at least 3 x N + 3 requests: its steady window holds the
requests sent in [first completion, last send), about P - N - 1 of P, and needs max(3, N)
of them; 3N + 3 leaves room for requests of varied lengths."""


def closed_requests(requests: int, streams: int) -> int:
    """A concurrency level's request count: the template's, and at least enough for a
    steady window at `streams`."""
    return max(requests, STEADY_PER_STREAM * streams + STEADY_EXTRA)


def rate_seconds(template: LevelSpec, e2e_s: float | None = None) -> float:
    """Server seconds of arrivals of a rate level: the template's `--duration`, at least
    `RATE_LEVEL_S`, and at least `RATE_LEVEL_E2ES` x `e2e_s` when one is known."""
    seconds = max(template.duration_s or 0.0, RATE_LEVEL_S)
    return max(seconds, RATE_LEVEL_E2ES * e2e_s) if e2e_s else seconds


def search_level(
    search: Search, template: LevelSpec, index: int, load: float, e2e_s: float | None = None
) -> LevelSpec:
    """The level measuring `load`, with the template's warm-up and flush.

    A rate level sends rate x `rate_seconds` requests (the count, not a deadline, ends it:
    a deadline would cut a Poisson level short of the requests the early stop plans for).
    A concurrency level sends `closed_requests` (a timed template keeps its duration)."""
    if search.kind == "rate":
        # The 1e-9: 2.8 x 30 is 84.00000000000001 in floating point, 84 requests.
        count = max(1, math.ceil(load * rate_seconds(template, e2e_s) - 1e-9))
        return replace(
            template, index=index, rate=load, concurrency=None, requests=count, duration_s=None
        )
    streams = int(load)
    requests = template.requests
    if requests is not None:
        requests = closed_requests(requests, streams)
    return replace(template, index=index, concurrency=streams, rate=None, requests=requests)


def slowest_e2e(levels: Iterable[LevelSummary]) -> float | None:
    """The slowest median E2E among a cell's passing levels (None: none passed). A failing
    level's E2E includes its queue, which says nothing of a request's own length."""
    medians = [lv.e2e.p50 for lv in levels if passed(lv) and lv.e2e.p50]
    return max(medians, default=None)


def sizing(search: Search, template: LevelSpec) -> str:
    """How the search sizes its levels, for its opening line."""
    if search.kind == "rate":
        seconds = rate_seconds(template)
        return (
            f"each level sends rate x {seconds:g} s of arrivals (at least {RATE_LEVEL_E2ES:g} x"
            " the slowest median E2E of the levels that passed), no cap on requests in flight,"
            f" and fails if the server completes under {PACE_SHARE:.0%} of what was sent"
        )
    if template.requests is None:
        return f"each level runs {template.duration_s or 0:g} s"
    return (
        f"each level sends max({template.requests}, {STEADY_PER_STREAM} x streams +"
        f" {STEADY_EXTRA}) requests, enough for a steady window"
    )


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
    return search_level(search, template, index, load, slowest_e2e(levels))


def search_for(
    kind: SearchKind, limit: float | None, levels: Sequence[LevelSpec]
) -> tuple[Search, LevelSpec]:
    """The search a request asks for, and the template of its levels: it starts at the
    lowest load the request lists (else 1 stream, or 1 request/s) and goes up to `limit`
    (else `DEFAULT_LIMIT`). UsageError when the limit is below the start, or for a rate
    search with a cap on requests in flight above 1 (a cap of 1 is every request's default
    and is dropped)."""
    template = levels[0]
    if kind == "rate":
        rates = [lv.rate for lv in levels if lv.rate is not None]
        start = min(rates) if rates else DEFAULT_START["rate"]
        if (template.concurrency or 0) > 1:
            raise UsageError(
                f"--find-max rate with --concurrency {template.concurrency} (campaign:"
                " `concurrency`): a cap on requests in flight holds arrivals in the client,"
                " and the time they wait there is not in their TTFT, so every rate would"
                " look carried; drop --concurrency for a rate search (or search"
                " concurrency instead)"
            )
        template = replace(template, rate=start, concurrency=None)
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
