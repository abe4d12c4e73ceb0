"""A rate level's pace (`find_max.pace`): a server short of the offered rate fails the level
whatever its latencies, one that keeps up never does at any rate the search tries; and a
fixed sweep's levels that never reached their concurrency stay out of the knee."""

from __future__ import annotations

import random

from console.bench.find_max import Pace, drain_limit_s, overdue_text, pace
from console.bench.knee import knee_of
from console.bench.results import LevelSummary, RequestResult
from console.bench.slo import parse_slo


def fifo(
    rate: float, capacity: float, seconds: float, *, seed: int = 0, base_s: float = 0.5
) -> list[RequestResult]:
    """Poisson arrivals at `rate` served first come first served at `capacity` requests per
    second, each taking `base_s` more once served (server seconds = wall seconds)."""
    rng = random.Random(seed)
    t, free, out = 0.0, 0.0, []
    for _ in range(max(2, round(rate * seconds))):
        t += rng.expovariate(rate)
        free = max(free, t) + 1.0 / capacity
        out.append(RequestResult(send_wall=1000.0 + t, e2e_s=free + base_s - t, ttft_s=0.1))
    return out


def test_a_server_short_of_the_rate_falls_behind() -> None:
    kept = pace(fifo(8.0, 4.0, 30), 8.0)
    assert kept.achieved is not None
    assert 3.6 < kept.achieved < 4.4
    assert kept.behind is not None
    assert kept.behind.startswith("fell behind: completed 4")
    assert "(offered 8/s; under 90%): the server does not carry this rate" in kept.behind
    assert kept.text().startswith("completed 4")


def test_a_server_that_keeps_up_never_falls_behind() -> None:
    """Over many Poisson draws, from 30 requests with 5 s answers to a thousand a second:
    the boundary noise allowance keeps every such level passing."""
    cases = [(1.0, 100.0, 5.0), (2.0, 3.0, 2.0), (8.0, 10.0, 0.5), (1000.0, 1200.0, 0.2)]
    for rate, capacity, base in cases:
        for seed in range(40 if rate < 100 else 3):
            kept = pace(fifo(rate, capacity, 30, seed=seed, base_s=base), rate)
            assert kept.behind is None, (rate, seed, kept)
            assert kept.achieved is not None
            assert kept.achieved > 0.6 * rate


def test_pace_is_per_server_second() -> None:
    """A 10x simulator: wall times a tenth of the server's, rates per server second."""
    server = fifo(8.0, 4.0, 30)
    wall = [
        RequestResult(send_wall=1000.0 + (r.send_wall - 1000.0) / 10, e2e_s=r.e2e_s) for r in server
    ]
    fast, slow = pace(wall, 8.0, time_scale=10.0), pace(server, 8.0)
    assert fast.achieved is not None
    assert slow.achieved is not None
    assert abs(fast.achieved - slow.achieved) < 1e-6
    assert fast.behind is not None


def test_a_client_that_could_not_send_the_rate_fails_the_level() -> None:
    sent = fifo(5.0, 100.0, 60)  # 300 requests at 5/s, labelled 10/s
    kept = pace(sent, 10.0)
    assert kept.behind is not None
    assert "the client sent 4.8" in kept.behind
    assert "of the offered 10/s" in kept.behind


def test_nothing_to_compare_is_no_verdict() -> None:
    assert pace([], 4.0).behind is None
    # Every request still running at the last send (answers longer than the level).
    late = [RequestResult(send_wall=1000.0 + i, e2e_s=100.0) for i in range(30)]
    assert pace(late, 1.0) == Pace(offered=1.0, sent=30, sent_rate=1.0, window_s=None)


def _level(index: int, streams: int, sent: int, passed: bool, **kw: object) -> LevelSummary:
    return LevelSummary(
        level=index,
        concurrency=streams,
        requests=sent,
        slo_pass=passed,
        **kw,  # type: ignore[arg-type]
    )


def test_a_sweep_level_that_never_reached_its_streams_is_not_in_the_knee() -> None:
    slo = parse_slo("ttft=200ms", "--slo", 0.9)
    # 1 request at 4 streams: never 4 in flight, so no verdict on 4.
    assert knee_of([_level(0, 1, 1, True), _level(1, 4, 1, False)], slo) is None
    knee = knee_of([_level(0, 1, 4, True), _level(1, 2, 4, True), _level(2, 4, 1, False)], slo)
    assert knee is not None
    assert (knee.value, knee.first_failing, knee.loads) == (2.0, None, (1.0, 2.0))
    # A level that reached its streams counts; so does a search's early-stopped one.
    reached = knee_of([_level(0, 1, 4, True), _level(1, 4, 4, False)], slo)
    assert reached is not None
    assert reached.first_failing == 4.0
    stopped = _level(1, 8, 3, False, early_stop="stopped early: 3 of 27 requests missed")
    early = knee_of([_level(0, 4, 16, True), stopped], slo, searched=True)
    assert early is not None
    assert (early.value, early.first_failing) == (4.0, 8.0)


def test_a_rate_level_may_run_its_arrivals_and_as_long_again() -> None:
    """480 requests at 16/s: 30 s of arrivals, 4.1 s of Poisson slack, 30 s to drain. A
    server that keeps up (E2E a tenth of the level) is done long before."""
    assert abs(drain_limit_s(480, 16.0) - (30.0 + 3 * 480**0.5 / 16 + 30.0)) < 1e-9
    kept_up = fifo(16.0, 20.0, 30, base_s=3.0)
    last_finish = max(r.send_wall + (r.e2e_s or 0.0) for r in kept_up)
    assert last_finish - kept_up[0].send_wall < drain_limit_s(len(kept_up), 16.0)
    text = overdue_text(195, 480, 16.0)
    assert text.startswith("fell behind: 195 of 480 requests finished 30 s after the arrivals")
    assert "the rest were cancelled" in text
