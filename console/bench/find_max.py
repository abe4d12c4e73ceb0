"""Saturation search: the highest load whose level meets the SLO (pure).

The search brackets by doubling from the lowest load until a level fails (or the limit
passes), then bisects between the highest passing and the lowest failing load until they
are one search step apart: 1 for concurrency, 10% for a request rate (relative, so a search
over 0.5-500 req/s costs the same number of levels at either end). The driver keeps no
state: the next load is a function of the loads measured so far and whether each passed,
so a resumed run continues from its `levels.jsonl` alone.

A level also stops early, counted as failing, once so many of its planned requests missed
the SLO that it could not reach the attainment even if every other one met it. A rate level
fails too when the server fell behind its arrivals (`pace`): latency alone does not show an
open loop's queue until it has grown past the SLO.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from console.bench.results import RequestResult

SearchKind = Literal["concurrency", "rate"]
KINDS: tuple[SearchKind, ...] = ("concurrency", "rate")
RATE_STEP = 0.10
"""A rate search ends when the failing rate is at most this much above the passing one."""
CONCURRENCY_STEP = 1
DEFAULT_LIMIT: dict[SearchKind, float] = {"concurrency": 1024, "rate": 1000.0}
"""The highest load tried when none is given."""
DEFAULT_START: dict[SearchKind, float] = {"concurrency": 1, "rate": 1.0}
"""The first load tried when the request gives no level to start from."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Search:
    """What to search: concurrency (closed loop) or rate (open loop), from `start` up to
    `limit` inclusive."""

    kind: SearchKind
    start: float
    limit: float

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"search kind must be one of {', '.join(KINDS)}")
        if not (math.isfinite(self.start) and self.start > 0):
            raise ValueError("the search's first load must be positive")
        if not (math.isfinite(self.limit) and self.limit >= self.start):
            raise ValueError("the search's limit must be at least its first load")
        if self.kind == "concurrency" and (self.start != int(self.start) or self.limit < 1):
            raise ValueError("a concurrency search runs whole numbers of streams")

    @property
    def step_text(self) -> str:
        """`1` or `10%`: how close the passing and failing loads end up."""
        return str(CONCURRENCY_STEP) if self.kind == "concurrency" else f"{RATE_STEP:.0%}"

    def close_enough(self, passing: float, failing: float) -> bool:
        """Whether no load worth trying lies between a passing and a failing one."""
        if self.kind == "concurrency":
            return failing - passing <= CONCURRENCY_STEP
        return failing <= passing * (1.0 + RATE_STEP) + 1e-9

    def between(self, passing: float, failing: float) -> float:
        """The load to try between a passing and a failing one (not close enough)."""
        if self.kind == "concurrency":
            return float((int(passing) + int(failing)) // 2)
        return _round_between(math.sqrt(passing * failing), passing, failing)

    def clamp(self, load: float) -> float:
        if self.kind == "concurrency":
            return float(min(int(self.limit), int(load)))
        return min(self.limit, load)


@dataclass(frozen=True, slots=True)
class Bracket:
    """Where a search stands: the highest passing load below the lowest failing one."""

    passing: float | None
    """None: nothing passed (the first load failed, or nothing was measured yet)."""
    failing: float | None
    """None: nothing failed (every load measured passed)."""


def bracket(measured: Mapping[float, bool]) -> Bracket:
    """The lowest failing load, and the highest passing load below it. A pass above a
    failure (noise, or a level run before a resume) does not move the knee past it."""
    failing = min((load for load, ok in measured.items() if not ok), default=None)
    passing = max(
        (load for load, ok in measured.items() if ok and (failing is None or load < failing)),
        default=None,
    )
    return Bracket(passing, failing)


def next_load(search: Search, measured: Mapping[float, bool]) -> float | None:
    """The load to measure next given each measured load and whether it passed; None when
    the search is done (its knee is `bracket(measured).passing`)."""
    if search.start not in measured:
        return search.start
    found = bracket(measured)
    if found.passing is None:
        return None  # fails at the lowest load
    if found.failing is None:
        if found.passing >= search.limit:
            return None  # passes up to the limit
        proposal = search.clamp(found.passing * 2)
        # A load already measured cannot bracket anything new (a limit below the doubling).
        return None if proposal in measured else proposal
    if search.close_enough(found.passing, found.failing):
        return None
    proposal = search.between(found.passing, found.failing)
    return None if proposal in measured else proposal


def loads_tried(search: Search, passes: Callable[[float], bool]) -> list[float]:
    """Every load the search measures, in order, against a pass/fail oracle (planning and
    tests: the runner measures levels instead)."""
    measured: dict[float, bool] = {}
    order: list[float] = []
    while (load := next_load(search, measured)) is not None:
        measured[load] = passes(load)
        order.append(load)
    return order


def max_levels(search: Search) -> int:
    """The most levels the search can measure: every doubling up to the limit, then the
    bisection of the widest bracket down to the search step."""
    doublings: list[float] = [search.start]
    while doublings[-1] < search.limit:
        doublings.append(search.clamp(doublings[-1] * 2))
    widest = 0
    for low, high in itertools.pairwise(doublings):
        if search.kind == "concurrency":
            gaps = high - low
        else:
            gaps = math.log(high / low) / math.log(1.0 + RATE_STEP)
        widest = max(widest, math.ceil(math.log2(gaps)) if gaps > 1 else 0)
    return len(doublings) + widest


def clearly_fails(planned: int | None, met: int, missed: int, attainment: float) -> bool:
    """Whether a level has already failed: even if every request still to finish met the
    SLO, fewer than `attainment` of the `planned` would have. Never for a timed level
    (`planned` None: its request count is not known ahead)."""
    if planned is None or planned <= 0:
        return False
    best = met + max(0, planned - met - missed)
    return best < attainment * planned - 1e-9


@dataclass(slots=True)
class LevelJudge:
    """Counts a running level's requests against the SLO and says when it clearly fails.

    A closed-loop level is judged on its steady window when it has one (the requests sent
    in [first completion, last send): its first `ramp` requests, sent together before any
    completion, and its last send left out), else on every request. The judge stops a level
    only when it fails either way: every request counted, and the requests certain to be in
    the window (`in_window`) out of the most the window can hold (`planned - ramp - 1`)."""

    planned: int | None
    attainment: float
    ramp: int = 0
    """Requests before the steady window (a closed loop's concurrency; 0: every request
    is judged, open loop or transients included)."""
    min_window: int = 3
    """Fewer requests than this (or than `ramp`) in the window: every request is judged."""
    met: int = 0
    missed: int = 0
    missed_in_window: int = 0
    stopped: bool = False
    """The level was found to fail before its end (it stops; it is done, not interrupted)."""

    def add(self, met: bool, in_window: bool = True) -> bool:
        """Count one finished request; True exactly once, when the level clearly fails
        with requests still to come (after its last one there is nothing to stop)."""
        if self.stopped or self.planned is None:
            return False
        if met:
            self.met += 1
        else:
            self.missed += 1
            self.missed_in_window += in_window
        left = self.met + self.missed < self.planned
        every = clearly_fails(self.planned, self.met, self.missed, self.attainment)
        window = self.planned - self.ramp - 1
        steady = self.ramp > 0 and window >= max(self.min_window, self.ramp)
        in_steady = not steady or clearly_fails(window, 0, self.missed_in_window, self.attainment)
        self.stopped = left and every and in_steady
        return self.stopped

    def why(self, slo_label: str) -> str:
        """`stopped early: 2 of 16 requests missed TTFT ≤ 200 ms (95% out of reach)`."""
        return (
            f"stopped early: {self.missed} of {self.planned} requests missed {slo_label}"
            f" ({self.attainment:.0%} out of reach)"
        )


def _round_between(value: float, low: float, high: float) -> float:
    """`value` to the fewest significant digits (at least two) that keep it strictly
    between `low` and `high`, so rates read `12` or `8.5`, not `8.485281`."""
    for digits in range(2, 16):
        rounded = float(f"{value:.{digits}g}")
        if low < rounded < high:
            return rounded
    return value


def describe(search: Search) -> str:
    """`concurrency from 1 up to 64 (step 1)` for event lines and estimates."""
    unit = "" if search.kind == "concurrency" else "/s"
    return (
        f"{search.kind} from {search.start:g}{unit} up to {search.limit:g}{unit} "
        f"(step {search.step_text})"
    )


def measured_from(pairs: Iterable[tuple[float, bool]]) -> dict[float, bool]:
    """Loads and verdicts as the driver takes them; a load measured twice (a level run
    again) keeps its last verdict."""
    return dict(pairs)


PACE_SHARE = 0.9
"""A rate level fails when the server completed less than this share of what was sent."""
PACE_Z = 3.0
"""Shortfalls within this many standard errors of the arrivals' own noise are not judged."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Pace:
    """How a rate level's server kept up with its arrivals, per server second.

    Measured over [first completion, last send): from the first completion on, a server that
    keeps up completes requests as fast as they arrive, and before the last send it has
    requests to complete. A server short of the rate completes at its own capacity, so its
    completions fall behind the sends counted over the same span. Both counts are compared
    with each other, not with the offered rate, because a Poisson level's realized arrivals
    themselves differ from the offered rate by about 1/sqrt(requests)."""

    offered: float
    sent: int
    """Requests sent (every one that ended, failures included)."""
    sent_rate: float | None
    """Requests sent per second from the first send to the last."""
    window_s: float | None
    """Length of [first completion, last send); None when no request finished before the
    last send (nothing to compare)."""
    sent_in_window: int = 0
    completed_in_window: int = 0
    """Requests that finished without an error inside the window."""
    e2e_s: float | None = None
    """Median E2E of the requests completed inside the window."""

    @property
    def achieved(self) -> float | None:
        """Completions per second inside the window: the rate the server carried."""
        if not self.window_s:
            return None
        return self.completed_in_window / self.window_s

    @property
    def behind(self) -> str | None:
        """Why the level fails on pace (None: it kept up, or it cannot be told).

        The server fell behind when it completed under `PACE_SHARE` of the requests sent in
        the window, by more than the window's boundary noise: requests sent within an E2E
        before the window opens finish inside it, those sent within an E2E before it closes
        finish after it, each about Poisson(rate x E2E), so the two counts differ by about
        sqrt(2 x rate x E2E) on a server that keeps up. The client falls short when it sent
        under `PACE_SHARE` of the offered rate by more than the arrivals' own noise
        (1/sqrt(requests) relative)."""
        if self.sent_rate is not None and self.sent > 1:
            slack = max(1.0 - PACE_SHARE, PACE_Z / math.sqrt(self.sent))
            if self.sent_rate < self.offered * (1.0 - slack):
                return (
                    f"fell behind: the client sent {self.sent_rate:.3g}/s of the offered"
                    f" {self.offered:g}/s, so this rate was never offered (run the"
                    " benchmark from a less loaded host)"
                )
        achieved = self.achieved
        if achieved is None or not self.window_s or not self.sent_in_window:
            return None
        missing = self.sent_in_window - self.completed_in_window
        rate = self.sent_in_window / self.window_s
        noise = PACE_Z * math.sqrt(2.0 * rate * (self.e2e_s or 0.0))
        if self.completed_in_window >= PACE_SHARE * self.sent_in_window or missing <= noise:
            return None
        return (
            f"fell behind: completed {achieved:.3g}/s while {rate:.3g}/s were sent"
            f" (offered {self.offered:g}/s; under {PACE_SHARE:.0%}): the server does not"
            " carry this rate"
        )

    def text(self) -> str:
        """`completed 7.9/s of 8/s offered` for event lines."""
        achieved = self.achieved
        done = "-" if achieved is None else f"{achieved:.3g}/s"
        return f"completed {done} of {self.offered:g}/s offered"


def pace(requests: Sequence[RequestResult], offered: float, time_scale: float = 1.0) -> Pace:
    """A rate level's pace from its requests (cancelled ones left out by the caller); send
    and finish times on the wall clock, rates per server second (`time_scale` server
    seconds per real second)."""
    scale = time_scale or 1.0
    sends = sorted(r.send_wall for r in requests)
    if len(sends) < 2:
        return Pace(offered=offered, sent=len(sends), sent_rate=None, window_s=None)
    span = (sends[-1] - sends[0]) * scale
    sent_rate = (len(sends) - 1) / span if span > 0 else None
    finishes = [
        (r.send_wall + r.e2e_s / scale, r.e2e_s)
        for r in requests
        if not r.error and r.e2e_s is not None
    ]
    last_send = sends[-1]
    first = min((finish for finish, _ in finishes), default=None)
    if first is None or first >= last_send:
        return Pace(offered=offered, sent=len(sends), sent_rate=sent_rate, window_s=None)
    inside = [e2e for finish, e2e in finishes if first <= finish <= last_send]
    return Pace(
        offered=offered,
        sent=len(sends),
        sent_rate=sent_rate,
        window_s=(last_send - first) * scale,
        sent_in_window=sum(1 for send in sends if first <= send < last_send),
        completed_in_window=len(inside),
        e2e_s=statistics.median(inside) if inside else None,
    )


def drain_limit_s(requests: int, rate: float) -> float:
    """Server seconds from a rate level's first send by which a server that keeps up has
    finished it: its arrivals (Poisson: `requests` take requests/rate, give or take
    sqrt(requests)/rate, so three of those are allowed), then as long again to drain. A
    level is many E2Es long (`search_levels.rate_seconds`), so a server that keeps up
    drains in a small part of that; one that fell behind drains for (rate - capacity) x
    its length / capacity, which the search does not wait for."""
    arrivals = requests / rate
    return arrivals + PACE_Z * math.sqrt(requests) / rate + arrivals


def overdue_text(finished: int, requests: int, rate: float) -> str:
    """The early stop of a rate level still running past `drain_limit_s`."""
    return (
        f"fell behind: {finished} of {requests} requests finished {requests / rate:.3g} s"
        f" after the arrivals at {rate:g}/s were due to end (the server, or the client"
        " sending them, does not carry this rate; the rest were cancelled)"
    )
