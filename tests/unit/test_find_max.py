"""The saturation search's driver and its early-stop rule, against pass/fail oracles."""

from __future__ import annotations

import pytest

from console.bench.find_max import (
    LevelJudge,
    Search,
    bracket,
    clearly_fails,
    loads_tried,
    max_levels,
    next_load,
)


def threshold(knee: float):
    """An oracle that passes every load up to `knee` (a server that saturates there)."""
    return lambda load: load <= knee


def test_brackets_by_doubling_then_bisects_to_one_stream() -> None:
    search = Search(kind="concurrency", start=1, limit=64)
    tried = loads_tried(search, threshold(24))
    # Doubling until 32 fails, then bisecting (16, 32) down to neighbours 24 and 25.
    assert tried == [1, 2, 4, 8, 16, 32, 24, 28, 26, 25]
    measured = {load: load <= 24 for load in tried}
    assert bracket(measured).passing == 24
    assert bracket(measured).failing == 25


@pytest.mark.parametrize("knee", [1, 2, 3, 7, 8, 9, 24, 31, 33, 63])
def test_concurrency_knee_is_exact(knee: int) -> None:
    search = Search(kind="concurrency", start=1, limit=64)
    tried = loads_tried(search, threshold(knee))
    found = bracket({load: load <= knee for load in tried})
    assert found.passing == knee
    assert found.failing == knee + 1
    assert len(tried) == len(set(tried))  # no level measured twice
    assert len(tried) <= max_levels(search)


def test_all_fail_stops_after_the_first_level() -> None:
    search = Search(kind="concurrency", start=1, limit=64)
    assert loads_tried(search, lambda load: False) == [1]
    assert bracket({1: False}) == bracket({1.0: False})
    assert bracket({1: False}).passing is None


def test_all_pass_stops_at_the_limit_without_exceeding_it() -> None:
    search = Search(kind="concurrency", start=1, limit=48)
    tried = loads_tried(search, lambda load: True)
    assert tried == [1, 2, 4, 8, 16, 32, 48]
    assert bracket(dict.fromkeys(tried, True)).failing is None
    assert bracket(dict.fromkeys(tried, True)).passing == 48


def test_a_failure_at_the_limit_bisects_below_it() -> None:
    search = Search(kind="concurrency", start=1, limit=48)
    tried = loads_tried(search, threshold(40))
    assert tried[:7] == [1, 2, 4, 8, 16, 32, 48]
    assert max(tried) == 48
    assert bracket({load: load <= 40 for load in tried}).passing == 40


def test_starts_from_the_given_load() -> None:
    search = Search(kind="concurrency", start=4, limit=100)
    tried = loads_tried(search, threshold(50))
    assert tried[0] == 4
    assert min(tried) == 4
    assert bracket({load: load <= 50 for load in tried}).passing == 50


def test_rate_search_ends_within_ten_percent() -> None:
    search = Search(kind="rate", start=0.5, limit=500)
    knee = 37.3
    tried = loads_tried(search, threshold(knee))
    found = bracket({load: load <= knee for load in tried})
    assert found.passing is not None
    assert found.failing is not None
    assert found.passing <= knee < found.failing
    assert found.failing <= found.passing * 1.1 + 1e-9
    # Bisected rates read as short numbers, not 8.485281.
    assert all(len(f"{load:g}") <= 6 for load in tried)
    assert len(tried) <= max_levels(search)


def test_rate_search_all_pass_ends_at_the_limit() -> None:
    search = Search(kind="rate", start=1, limit=10)
    assert loads_tried(search, lambda load: True) == [1, 2, 4, 8, 10]


@pytest.mark.parametrize(("start", "limit"), [(1, 64), (1, 100), (3, 40), (1, 1)])
def test_max_levels_bounds_every_concurrency_search(start: int, limit: int) -> None:
    search = Search(kind="concurrency", start=start, limit=limit)
    counts = [len(loads_tried(search, threshold(knee))) for knee in range(start - 1, limit + 1)]
    assert max(counts) <= max_levels(search)
    # The bound is reached by some knee: it is not a loose guess.
    assert max(counts) >= max_levels(search) - 1


def test_max_levels_bounds_rate_searches() -> None:
    search = Search(kind="rate", start=0.5, limit=200)
    knees = [0.4 + 0.37 * i for i in range(560)]
    assert max(len(loads_tried(search, threshold(k))) for k in knees) <= max_levels(search)


def test_resume_continues_from_what_was_measured() -> None:
    """The driver is a function of the measured set: the levels a first attempt finished,
    handed to it again, lead to the same next loads as an uninterrupted search."""
    search = Search(kind="concurrency", start=1, limit=64)
    full = loads_tried(search, threshold(24))
    for cut in range(len(full)):
        measured = {load: load <= 24 for load in full[:cut]}
        assert next_load(search, measured) == full[cut]
    assert next_load(search, {load: load <= 24 for load in full}) is None


def test_noise_above_a_failure_does_not_move_the_knee() -> None:
    # 16 passed after 8 failed (a noisy level, or an older attempt): the knee stays below 8.
    measured: dict[float, bool] = {1: True, 2: True, 4: True, 8: False, 16: True}
    assert bracket(measured).passing == 4
    assert next_load(Search(kind="concurrency", start=1, limit=64), measured) == 6


@pytest.mark.parametrize(
    ("planned", "met", "missed", "attainment", "fails"),
    [
        (20, 0, 1, 0.95, False),  # one miss in 20 still allows 95%
        (20, 0, 2, 0.95, True),  # two cannot: at most 18/20 = 90%
        (20, 17, 2, 0.95, True),
        (100, 3, 5, 0.95, False),  # exactly 95% still reachable
        (100, 3, 6, 0.95, True),
        (10, 0, 0, 1.0, False),
        (10, 9, 1, 1.0, True),  # every request must meet it: one miss fails
        (10, 0, 5, 0.5, False),
        (10, 0, 6, 0.5, True),
        (None, 0, 50, 0.95, False),  # a timed level: its count is not known
        (0, 0, 0, 0.95, False),
    ],
)
def test_clearly_fails(
    planned: int | None, met: int, missed: int, attainment: float, fails: bool
) -> None:
    assert clearly_fails(planned, met, missed, attainment) is fails


def test_the_judge_stops_a_level_once_with_requests_left() -> None:
    judge = LevelJudge(planned=8, attainment=0.75)
    assert [judge.add(met) for met in (True, False, False)] == [False, False, False]
    assert judge.add(False) is True  # a third miss of 8: 75% is out of reach
    assert judge.stopped
    assert judge.add(False) is False  # said once
    assert "3 of 8 requests missed TTFT ≤ 1 s" in judge.why("TTFT ≤ 1 s")
    last = LevelJudge(planned=4, attainment=0.75)
    # The miss that decides it is the level's last request: nothing is left to stop.
    assert [last.add(met) for met in (True, True, False, False)] == [False] * 4
    assert not last.stopped
    timed = LevelJudge(planned=None, attainment=0.95)
    assert not any(timed.add(False) for _ in range(20))


def test_a_closed_loop_is_stopped_only_when_its_steady_window_fails_too() -> None:
    """Misses of the ramp-up (the first `ramp` requests, sent together) are left out of a
    steady window: they alone never stop a level that its window could still pass. The
    window holds the requests sent in [first completion, last send): `planned - ramp - 1`
    at most (the last send is not in it)."""
    judge = LevelJudge(planned=16, attainment=0.75, ramp=4)
    assert not any(judge.add(False, in_window=False) for _ in range(4))
    # Every request counted, 5 misses of 16 already fail; the window (11 at most) can still
    # pass with 2 misses of its own (9/11 >= 75%), not with 3 (8/11 < 75%).
    assert not any(judge.add(False, in_window=True) for _ in range(2))
    assert judge.add(False, in_window=True) is True
    assert (judge.missed, judge.missed_in_window) == (7, 3)
    # A window too small to be steady (fewer than 3 requests, or than the ramp): the level
    # is judged on every request, as the summary does.
    short = LevelJudge(planned=6, attainment=0.75, ramp=4)
    assert [short.add(False, in_window=False) for _ in range(2)] == [False, True]
    # 8 planned at 4 streams: the window holds 3 at most, fewer than the 4 streams, so the
    # summary counts every request; out-of-window misses alone stop it (old rule: 4, steady).
    edge = LevelJudge(planned=8, attainment=0.75, ramp=4)
    assert [edge.add(False, in_window=False) for _ in range(3)] == [False, False, True]


def test_an_early_stopped_level_also_fails_on_what_it_measured() -> None:
    """Whenever the rule stops a level, the share met among the requests it did measure is
    below the attainment too: the verdict does not depend on the requests never sent."""
    for planned in range(1, 40):
        for attainment in (0.5, 0.9, 0.95, 0.99, 1.0):
            for missed in range(planned + 1):
                for met in range(planned - missed + 1):
                    if clearly_fails(planned, met, missed, attainment) and met + missed:
                        assert met / (met + missed) < attainment


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "concurrency", "start": 0, "limit": 4},
        {"kind": "concurrency", "start": 1.5, "limit": 4},
        {"kind": "rate", "start": 2, "limit": 1},
        {"kind": "rate", "start": float("nan"), "limit": 1},
        {"kind": "tokens", "start": 1, "limit": 4},
    ],
)
def test_bad_searches_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="search"):
        Search(**kwargs)
