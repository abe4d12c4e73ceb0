"""The steady-state window of a closed-loop level: where its concurrency was at target.

A closed loop of N workers starts N requests at once (ramp-up: a burst of prefills no
production server sees) and ends with fewer and fewer in flight (drain). Between the first
completion (from then on each completion is followed by a new send) and the last send, N
requests are in flight. Latency statistics count the requests SENT inside that window
(half-open, [first completion, last send)): a send time says nothing about a request's own
length, so long requests are not under-counted as they would be if a request had to finish
inside the window too. Throughput counts the tokens generated inside it, each request's
tokens spread evenly over its decode span (first token to last), and the request rate the
completions inside it, as SGLang's steady-state report does (sglang 0.5.23
benchmark/steady_state.py:128-160, 208-212). Open-loop levels have no concurrency target and
keep every request, as do levels too short to have a window and runs with
`--include-transients`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from console.bench.results import RequestResult

ALL = "all"
STEADY = "steady"
MIN_STEADY_REQUESTS = 3
"""Fewer finished requests than this (or than the concurrency) inside the window: the level
is too short for a steady state, and every request is counted."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """Which of a level's requests its statistics count, and over how long."""

    kind: str
    """`steady` or `all`."""
    why: str | None
    """Why every request is counted (None for a steady window)."""
    start_s: float | None
    """Offset of the window from the level's start, in the server's seconds."""
    end_s: float | None
    requests: tuple[RequestResult, ...]
    """The requests counted (failures included; callers split them)."""
    duration_s: float
    """The seconds throughput is measured over (server seconds)."""
    output_tokens: float
    """Output tokens generated within the window (all finished requests' for `all`)."""
    completions: int
    """Requests that finished without an error within the window (all of them for `all`)."""


def _finish(request: RequestResult, scale: float) -> float:
    """When the request ended, on the wall clock (a failure without a latency: its send)."""
    return request.send_wall + (request.e2e_s or 0.0) / scale


def in_window(request: RequestResult, start_wall: float, end_wall: float) -> bool:
    """Whether a closed-loop level's statistics count this request: sent in the steady
    window [start, end) (wall clock), whatever its length."""
    return start_wall <= request.send_wall < end_wall


def whole_level(requests: Sequence[RequestResult], duration_s: float, why: str | None) -> Window:
    ok = [r for r in requests if not r.error]
    return Window(
        kind=ALL,
        why=why,
        start_s=None,
        end_s=None,
        requests=tuple(requests),
        duration_s=duration_s,
        output_tokens=float(sum(int(r.output_tokens or 0) for r in ok)),
        completions=len(ok),
    )


def steady_window(
    requests: Sequence[RequestResult],
    *,
    concurrency: int | None,
    rate: float | None,
    started_wall: float,
    duration_s: float,
    time_scale: float = 1.0,
    include_transients: bool = False,
) -> Window:
    """The window a level's statistics are computed over (see the module's docstring).
    `duration_s` is the whole level's, in server seconds; `started_wall` its first send."""
    if include_transients:
        return whole_level(requests, duration_s, "transients included (--include-transients)")
    if rate is not None or not concurrency:
        return whole_level(requests, duration_s, "open loop: no concurrency target")
    scale = time_scale or 1.0
    finished = [r for r in requests if not r.error and r.e2e_s is not None]
    if not finished:
        return whole_level(requests, duration_s, "no request finished")
    first_completion = min(_finish(r, scale) for r in finished)
    last_send = max(r.send_wall for r in requests)
    inside = [r for r in requests if in_window(r, first_completion, last_send)]
    counted_ok = sum(1 for r in inside if not r.error)
    if last_send <= first_completion or counted_ok < max(MIN_STEADY_REQUESTS, concurrency):
        return whole_level(
            requests,
            duration_s,
            f"too short for a steady state ({counted_ok} requests sent inside it; run at least "
            f"{3 * concurrency + MIN_STEADY_REQUESTS} at concurrency {concurrency})",
        )
    tokens = 0.0
    for r in finished:
        first_token = r.send_wall + (r.ttft_s or 0.0) / scale
        end = _finish(r, scale)
        count = int(r.output_tokens or 0)
        if end <= first_token:
            if first_completion <= end <= last_send:
                tokens += count
            continue
        overlap = min(end, last_send) - max(first_token, first_completion)
        if overlap > 0:
            tokens += count * overlap / (end - first_token)
    # (start, end]: the completion that opens the window is its fence post, not inside it.
    completions = sum(1 for r in finished if first_completion < _finish(r, scale) <= last_send)
    return Window(
        kind=STEADY,
        why=None,
        start_s=(first_completion - started_wall) * scale,
        end_s=(last_send - started_wall) * scale,
        requests=tuple(inside),
        duration_s=(last_send - first_completion) * scale,
        output_tokens=tokens,
        completions=completions,
    )
