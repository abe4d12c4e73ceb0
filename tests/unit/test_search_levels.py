"""A saturation search's levels as the runner builds them: from the request (first load,
limit, template), from what a run measured (verdicts, the next index on resume), and how
progress and the estimate speak of a search whose level count is not known ahead."""

from __future__ import annotations

import heapq
import random
from dataclasses import replace

import pytest

from console.bench.campaign import search_text
from console.bench.estimate import CellSpeed, estimate_bench
from console.bench.find_max import Search, max_levels
from console.bench.levels import LevelSpec
from console.bench.listing import LevelProgress, Progress
from console.bench.live_progress import LevelTracker
from console.bench.request import BenchRequest
from console.bench.results import LevelSummary, RequestResult, Stats
from console.bench.search_levels import history, next_level, search_for, search_level
from console.bench.steady import steady_window
from console.cli.progress_line import bar_line, plain_line
from console.cli.runner import run_options
from console.core.errors import UsageError

URL = "http://127.0.0.1:9"


def bench(**kwargs: object) -> BenchRequest:
    return BenchRequest(url=URL, slo="ttft=200ms", **kwargs)  # type: ignore[arg-type]


def level(index: int, concurrency: int, *, passed: bool, status: str = "done") -> LevelSummary:
    return LevelSummary(
        level=index,
        concurrency=concurrency,
        status=status,
        requests=8,
        slo_pass=passed,
    )


def test_a_concurrency_search_starts_at_the_lowest_listed_level() -> None:
    options = run_options(bench(find_max="concurrency", concurrency=(4, 2), requests=8))
    assert options.search == Search(kind="concurrency", start=2, limit=1024)
    (template,) = options.levels
    assert (template.concurrency, template.rate, template.requests) == (2, None, 8)
    # The client keeps a connection per stream up to the limit.
    assert options.pool_size(options.levels) == 1024


def test_without_a_search_the_listed_levels_run() -> None:
    options = run_options(bench(concurrency=(1, 4), requests=8))
    assert options.search is None
    assert [lv.concurrency for lv in options.levels] == [1, 4]


def test_a_rate_search_runs_uncapped_levels_and_refuses_a_cap() -> None:
    options = run_options(bench(find_max="rate", find_max_limit=50, requests=8))
    assert options.search == Search(kind="rate", start=1.0, limit=50)
    (template,) = options.levels
    assert (template.rate, template.concurrency) == (1.0, None)
    # No cap: the pool is sized for an open loop, not for one connection.
    assert options.pool_size(options.levels) > 100
    # A cap hides the arrivals' wait in the client from TTFT: refused, naming the flag.
    with pytest.raises(UsageError, match=r"--concurrency 16 .*drop --concurrency"):
        run_options(bench(find_max="rate", rates=(3.0, 2.0), concurrency=(16,)))
    with pytest.raises(UsageError, match="--concurrency 2"):
        run_options(bench(find_max="rate", concurrency=(2,)))
    # A cap of 1 is the default of every request: dropped, as before.
    (lone,) = run_options(bench(find_max="rate", rates=(2.0,), concurrency=(1,))).levels
    assert lone.concurrency is None


def test_a_rate_level_sends_rate_times_its_seconds() -> None:
    """A rate level is long enough for a queue to build: rate x 30 s (or --duration, or
    10 x the slowest passing median E2E), whatever the template's request count."""
    search, template = search_for("rate", 100, [LevelSpec(0, None, 2.0, 16, None)])
    first = search_level(search, template, 0, 2.0)
    assert (first.rate, first.concurrency, first.requests, first.duration_s) == (
        2.0,
        None,
        60,
        None,
    )
    assert search_level(search, template, 3, 40.0).requests == 1200
    timed = replace(template, duration_s=90.0, requests=None)
    assert search_level(search, timed, 1, 4.0).requests == 360
    # After a passing level whose median E2E was 6 s: 60 s of arrivals.
    slow = LevelSummary(level=0, rate=2.0, requests=60, slo_pass=True, e2e=Stats(p50=6.0))
    failing = LevelSummary(level=1, rate=4.0, requests=9, slo_pass=False, e2e=Stats(p50=50.0))
    upcoming = next_level(search, template, [slow, failing])
    assert upcoming is not None
    # The failing level's E2E (its queue) does not lengthen the next level.
    assert (upcoming.rate, upcoming.requests) == (2.8, 168)
    line = search_text(search, None, template)
    assert "each level sends rate x 30 s of arrivals" in line
    assert "no cap on requests in flight" in line


def test_an_uncapped_open_loop_is_not_squeezed_into_a_few_connections() -> None:
    options = run_options(bench(rates=(2.0, 4.0), requests=8))
    assert options.pool_size(options.levels) > 100
    capped = run_options(bench(rates=(2.0,), concurrency=(8,), requests=8))
    assert capped.pool_size(capped.levels) == 8


def test_a_limit_below_the_first_load_is_refused() -> None:
    with pytest.raises(UsageError, match="--find-max-limit 2 is below"):
        run_options(bench(find_max="concurrency", concurrency=(4,), find_max_limit=2))


def test_a_concurrency_level_sends_enough_requests_for_a_steady_window() -> None:
    """max(template's requests, 3 x N + 3): every level from 1 stream to the limit has a
    steady window, not only the low ones (16 requests at 8 streams would be all ramp-up)."""
    template = LevelSpec(0, 1, None, 16, None)
    search = Search(kind="concurrency", start=1, limit=64)
    assert search_level(search, template, 3, 4).requests == 16
    assert search_level(search, template, 4, 8).requests == 27
    wide = search_level(search, template, 5, 32)
    assert (wide.index, wide.concurrency, wide.requests) == (5, 32, 99)
    # A timed template keeps its duration.
    timed = search_level(search, replace(template, requests=None, duration_s=60.0), 1, 8)
    assert (timed.requests, timed.duration_s) == (None, 60.0)
    line = search_text(search, None, template)
    assert "each level sends max(16, 3 x streams + 3) requests" in line


def test_resume_reruns_a_cut_level_under_its_own_index() -> None:
    search, template = search_for("concurrency", 64, [LevelSpec(0, 1, None, 8, None)])
    measured = [
        level(0, 1, passed=True),
        level(1, 2, passed=True),
        level(2, 4, passed=False, status="interrupted"),
    ]
    upcoming = next_level(search, template, measured)
    assert upcoming is not None
    assert (upcoming.index, upcoming.concurrency) == (2, 4)
    measured[2] = level(2, 4, passed=False)
    upcoming = next_level(search, template, measured)
    assert upcoming is not None
    assert (upcoming.index, upcoming.concurrency) == (3, 3)


def test_a_level_whose_requests_all_failed_is_a_failing_verdict() -> None:
    """Every request of a `bench --url` level failing (no server death the runner sees) is a
    verdict, not a level to measure again: the search goes below it."""
    search, template = search_for("concurrency", 64, [LevelSpec(0, 1, None, 8, None)])
    measured = [
        level(0, 1, passed=True),
        level(1, 2, passed=True),
        level(2, 4, passed=True, status="failed"),
    ]
    upcoming = next_level(search, template, measured)
    assert upcoming is not None
    assert (upcoming.index, upcoming.concurrency) == (3, 3)


def test_an_early_stopped_or_unjudged_level_fails() -> None:
    search = Search(kind="concurrency", start=1, limit=8)
    stopped = LevelSummary(
        level=1, concurrency=2, slo_pass=True, early_stop="stopped early: 1 of 8 ..."
    )
    unjudged = LevelSummary(level=2, concurrency=4, slo_pass=None)
    assert history(search, [level(0, 1, passed=True), stopped, unjudged]) == {
        1.0: True,
        2.0: False,
        4.0: False,
    }


def test_progress_of_a_search_says_searching_not_a_count() -> None:
    tracker = LevelTracker(
        Progress(cell="kimi/tp8/off", level=2, done=0, planned=8),
        LevelSpec(2, 4, None, 8, None),
        levels=0,
    )
    live = tracker.live()
    assert live.of == 0
    progress = tracker.progress()
    assert plain_line(progress, live).startswith(
        "kimi/tp8/off: level 3, searching (concurrency 4): 0/8 requests"
    )
    assert "L3, searching concurrency 4" in bar_line(progress, live, 200)
    counted = LevelProgress(
        index=1,
        of=3,
        concurrency=4,
        rate=None,
        completed=0,
        total=8,
        errors=0,
        output_tok_s=None,
        elapsed_s=0.0,
        eta_s=None,
    )
    assert counted.position() == "2 of 3"
    assert counted.position("/") == "2/3"


def test_the_estimate_of_a_search_gives_its_most_levels_not_a_duration() -> None:
    request = bench(find_max="concurrency", find_max_limit=64, requests=16)
    estimate = estimate_bench(request, CellSpeed(step_s=0.037))
    assert estimate.searching
    assert estimate.seconds is None
    assert estimate.levels == max_levels(Search(kind="concurrency", start=1, limit=64))
    assert estimate.describe() == (
        f"up to {estimate.levels} levels (saturation search) × at least 16 requests; the"
        " duration depends on the load where it saturates"
    )


def _closed_loop(streams: int, total: int, seed: int) -> list[RequestResult]:
    """An exact closed loop: each stream sends its next request when its last one ends;
    answers of 2-600 tokens at 10 ms each (a chat-like spread)."""
    rng = random.Random(seed)
    heap = [(0.0, stream) for stream in range(streams)]
    out = []
    for _ in range(total):
        now, stream = heapq.heappop(heap)
        e2e = 0.05 + min(600, max(2, int(rng.expovariate(1 / 200)))) * 0.01
        out.append(RequestResult(send_wall=1000.0 + now, ttft_s=0.05, e2e_s=e2e))
        heapq.heappush(heap, (now + e2e, stream))
    return out


def test_every_concurrency_level_of_a_search_has_a_steady_window() -> None:
    """With the default 16 requests, levels from 6 streams up used to be all ramp-up: now
    each is judged on its steady window, up to the limit."""
    search, template = search_for("concurrency", 128, [LevelSpec(0, 1, None, 16, None)])
    for streams in (1, 2, 4, 6, 8, 16, 32, 64, 128):
        spec = search_level(search, template, 0, streams)
        for seed in range(3):
            requests = _closed_loop(streams, spec.requests or 0, seed)
            window = steady_window(
                requests, concurrency=streams, rate=None, started_wall=1000.0, duration_s=1.0
            )
            assert window.kind == "steady", (streams, spec.requests, window.why)


def test_the_estimate_of_a_rate_search_counts_its_first_level_of_arrivals() -> None:
    estimate = estimate_bench(bench(find_max="rate", rates=(2.0,), find_max_limit=50), None)
    assert estimate.searching
    assert "× at least 60 requests;" in estimate.describe()
