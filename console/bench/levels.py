"""Run one benchmark level: closed-loop concurrency, open-loop Poisson arrivals, or a trace's
own arrival times.

Server counters are read just before and just after the level, so acceptance is measured
over the level alone (never SGLang's lifetime average). Warm-up requests are not recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from console.bench.client import Endpoint, RequestResult, encode_body, ids_sent, run_request
from console.bench.results import CANCELLED, Counters, JsonDict
from console.bench.timed_send import TimedSender, can_send_timed
from console.bench.workload import Prompt, PromptSource, Workload
from console.core.auth import bearer_from_env
from console.core.http import JSON_MAX_BYTES, METRICS_MAX_BYTES, get_capped, request_capped
from console.telemetry.prometheus import MetricsParseError, MetricsSnapshot, parse
from console.topology.placement import Plan

T = TypeVar("T")
PROMPT_BATCH = 256
"""Prompts are generated this many at a time (warm-up included), never all up front..."""
BATCH_TOKENS = 1 << 22
"""...and fewer when they are long: a batch holds about this many token ids at most."""


def batch_size(workload: Workload, wanted: int) -> int:
    return max(1, min(PROMPT_BATCH, wanted, BATCH_TOKENS // max(1, workload.input_len)))


DEPENDENT_LOOKAHEAD = 4096
"""How far past the first request not yet sent a dependent source (multi-turn) is searched
for one that is ready."""
REPLAY_LOOKAHEAD_S = 0.25
"""A trace replay makes each request, and opens its connection, this long (real seconds)
before its send time: long enough that a busy event loop (on a loaded machine its turns
take tens of ms) still hands each request to the send thread before it is due."""
COUNTERS_DEADLINE_S = 10.0
STOPPED_COUNTERS_DEADLINE_S = 0.5
FLUSH_DEADLINE_S = 90.0

GATEWAY_WORKER_LABEL = "worker_addr"
"""The label smg's /engine_metrics puts on each worker's series."""
COUNTER_NAMES = frozenset(
    {
        "sglang:spec_verify_calls_total",
        "sglang:generation_tokens_total",
        "sglang:realtime_tokens_total",
        "sglang:num_requests_total",
        "sglang:spec_accept_length",
        "sglang:spec_accept_rate",
        "sglang:gen_throughput",
    }
)


@dataclass(frozen=True)
class Target:
    """A ready server to load: where, how to authenticate, and its clock."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    time_scale: float = 1.0
    server_info: JsonDict | None = None
    admin_headers: dict[str, str] | None = None
    """Authorization for /flush_cache when the server has `--admin-api-key`: SGLang's
    ADMIN_OPTIONAL routes then take only the admin key (sglang 0.5.23
    srt/utils/auth.py:125-137, srt/entrypoints/http_server.py:1025-1026)."""


def admin_headers(
    plan: Plan | None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str] | None:
    """The admin key's Authorization header, read from the variable the plan names."""
    name = plan.admin_api_key_env if plan is not None else None
    return bearer_from_env(name, environ) or None


@dataclass(frozen=True)
class LevelSpec:
    index: int
    concurrency: int | None
    rate: float | None
    requests: int | None
    duration_s: float | None
    warmup: int = 1
    flush_cache: bool = False
    replay: float | None = None
    """Trace replay speed-up (a timed workload): 1 keeps the trace's clock, 2 sends twice as
    fast. None for a level that is not a replay."""

    @property
    def label(self) -> str:
        if self.replay is not None:
            return "trace replay" + (f" x{self.replay:g}" if self.replay != 1 else "")
        if self.rate is not None:
            cap = f", max {self.concurrency} in flight" if self.concurrency else ""
            return f"rate {self.rate:g}/s{cap}"
        return f"concurrency {self.concurrency}"


@dataclass
class LevelOutcome:
    spec: LevelSpec
    started_wall: float
    ended_wall: float
    wall_s: float
    """Real seconds from the first send to the last completion."""
    results: list[RequestResult]
    counters_before: Counters | None
    """None when /metrics could not be read (then acceptance comes from the requests)."""
    counters_after: Counters | None
    interrupted: bool = False
    flush_error: str | None = None
    """Why the level's /flush_cache failed (None: not asked for, or flushed)."""


async def read_counters(
    client: httpx.AsyncClient, url: str, *, deadline_s: float = COUNTERS_DEADLINE_S
) -> Counters | None:
    """The counters acceptance and throughput are computed from, and the live gauge; None
    when neither /metrics nor, for SGLang's model gateway, /engine_metrics answers with them.

    smg serves no SGLang counters on /metrics; its /engine_metrics is every worker's
    /metrics with a `worker_addr` label, summed here, with the workers named so that a level
    whose workers changed between its readings gets no increase."""
    started = time.monotonic()
    snapshot = await _read_snapshot(client, f"{url}/metrics", deadline_s)
    workers: tuple[str, ...] = ()
    if snapshot is None or snapshot.total("sglang:generation_tokens_total") is None:
        left = deadline_s - (time.monotonic() - started)
        gateway = await _read_snapshot(client, f"{url}/engine_metrics", left) if left > 0 else None
        if gateway is not None:
            workers = _worker_addrs(gateway)
            if workers:
                snapshot = gateway
    if snapshot is None:
        return None
    gauges = [v for v in snapshot.values("sglang:spec_accept_length") if v > 0]
    return Counters(
        spec_verify_calls=snapshot.total("sglang:spec_verify_calls_total"),
        generation_tokens=snapshot.total("sglang:generation_tokens_total"),
        decode_tokens=snapshot.total("sglang:realtime_tokens_total", mode="decode"),
        requests=snapshot.total("sglang:num_requests_total"),
        accept_length_gauge=sum(gauges) / len(gauges) if gauges else None,
        workers=workers,
        worker_generation_tokens=_per_worker(snapshot, "sglang:generation_tokens_total", workers),
        worker_requests=_per_worker(snapshot, "sglang:num_requests_total", workers),
    )


def _per_worker(
    snapshot: MetricsSnapshot, name: str, workers: tuple[str, ...]
) -> tuple[float, ...]:
    """Each gateway worker's own total of counter `name`, in `workers`' order."""
    return tuple(snapshot.total(name, **{GATEWAY_WORKER_LABEL: w}) or 0.0 for w in workers)


async def _read_snapshot(
    client: httpx.AsyncClient, url: str, deadline_s: float
) -> MetricsSnapshot | None:
    try:
        response = await get_capped(client, url, deadline_s=deadline_s, max_bytes=METRICS_MAX_BYTES)
        return parse(response.text, COUNTER_NAMES) if response.status_code == 200 else None
    except (httpx.HTTPError, MetricsParseError):
        return None


def _worker_addrs(snapshot: MetricsSnapshot) -> tuple[str, ...]:
    """The `worker_addr` labels of a gateway's counters (empty: not a gateway's text)."""
    found = {
        labels[GATEWAY_WORKER_LABEL]
        for series in snapshot.samples.values()
        for labels, _ in series
        if GATEWAY_WORKER_LABEL in labels
    }
    return tuple(sorted(found))


async def flush_cache(client: httpx.AsyncClient, target: Target) -> str | None:
    """Flush the radix cache; None when flushed, else why not (for the level's record)."""
    headers = target.admin_headers if target.admin_headers is not None else target.headers
    try:
        response = await request_capped(
            client,
            "POST",
            f"{target.url}/flush_cache",
            params={"timeout": 60},
            headers=headers,
            deadline_s=FLUSH_DEADLINE_S,
            max_bytes=JSON_MAX_BYTES,
        )
    except httpx.HTTPError as exc:
        return f"/flush_cache failed: {type(exc).__name__}: {exc}"
    if response.status_code == 200:
        return None
    if response.status_code in (401, 403):
        which = "admin key" if target.admin_headers is not None else "API key"
        hint = (
            f"the server refused the {which}"
            if headers
            else "the server wants a key: name its variable in the profile's server.api_key_env"
            " or server.admin_api_key_env"
        )
        return f"/flush_cache: HTTP {response.status_code} ({hint})"
    # SGLang answers 400 with its reason, e.g. requests still pending (http_server.py:1029-1040).
    detail = " ".join(response.text.split())[:200]
    return f"/flush_cache: HTTP {response.status_code}" + (f": {detail}" if detail else "")


async def run_level(
    client: httpx.AsyncClient,
    target: Target,
    endpoint: Endpoint,
    workload: Workload,
    spec: LevelSpec,
    *,
    on_result: Callable[[int, RequestResult], None],
    stop: asyncio.Event,
) -> LevelOutcome:
    """Run the level; `on_result(index, result)` sees each finished request at once.
    Every step (warm-up, flush, counter reads, requests) gives way to `stop` at once."""
    send = _sender(client, target, endpoint)
    results: list[RequestResult] = []
    started_wall = time.time()
    flush_error: str | None = None
    before: Counters | None = None

    def stopped_outcome() -> LevelOutcome:
        return LevelOutcome(
            spec,
            started_wall,
            time.time(),
            0.0,
            results,
            before,
            None,
            interrupted=True,
            flush_error=flush_error,
        )

    warmed = 0
    while warmed < spec.warmup:
        batch = batch_size(workload, spec.warmup - warmed)
        seed = 10_000 + spec.index if warmed == 0 else (10_000 + spec.index) * 1000 + warmed
        if workload.source is not None:
            # Its own stream (salt), so warm-up fills no cache the level then reads.
            warm = workload.source.prompts(10_000 + spec.index, warmed, batch)
            batch = len(warm) or batch
        else:
            warm = workload.prompts(batch, level=seed)
        for prompt in warm:
            if await until_stopped(send(prompt), stop) is None:
                return stopped_outcome()
        warmed += batch
    if spec.flush_cache:
        flushed = await until_stopped(boxed(flush_cache(client, target)), stop)
        if flushed is None:
            return stopped_outcome()
        flush_error = flushed[0]
    read = await until_stopped(boxed(read_counters(client, target.url)), stop)
    if read is None:
        return stopped_outcome()
    before = read[0]
    started_wall = time.time()
    start = time.perf_counter()
    # A level's duration is in the server's seconds (a simulator may run faster than life).
    deadline = start + spec.duration_s / target.time_scale if spec.duration_s else None
    count = spec.requests if spec.requests is not None else 1_000_000
    prompts = _PromptSource(workload, spec.index, count)

    def keep(index: int, result: RequestResult) -> None:
        results.append(result)
        on_result(index, result)

    if workload.timed:
        speed = spec.replay or 1.0
        async with contextlib.AsyncExitStack() as stack:
            timed = (
                await stack.enter_async_context(
                    TimedSender(
                        target.url,
                        endpoint,
                        headers=target.headers,
                        time_scale=target.time_scale,
                        read_timeout_s=client.timeout.read,
                    )
                )
                if can_send_timed(target.url, target.headers)
                else None
            )
            # The level starts when the trace's clock does (after its first prompt is made).
            started_wall = await _trace_loop(
                send, timed, prompts, target.time_scale * speed, deadline, stop, keep
            )
    elif spec.rate is not None:
        await _open_loop(send, prompts, spec, deadline, stop, keep, target.time_scale)
    else:
        await _closed_loop(send, prompts, spec.concurrency or 1, deadline, stop, keep)
    wall = time.perf_counter() - start
    if stop.is_set():
        # Interrupted: the counters so far if the server answers at once (acceptance over
        # what was measured), never a wait on a server that does not.
        after = await read_counters(client, target.url, deadline_s=STOPPED_COUNTERS_DEADLINE_S)
    else:
        read_after = await until_stopped(boxed(read_counters(client, target.url)), stop)
        after = read_after[0] if read_after is not None else None
    return LevelOutcome(
        spec,
        started_wall,
        time.time(),
        wall,
        results,
        before,
        after,
        interrupted=stop.is_set(),
        flush_error=flush_error,
    )


async def until_stopped(work: Awaitable[T], stop: asyncio.Event) -> T | None:
    """`work`'s result, or None (and `work` cancelled) as soon as `stop` is set. Results that
    may themselves be None are wrapped by the caller (`boxed`)."""
    if stop.is_set():
        if asyncio.iscoroutine(work):
            work.close()
        return None
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not task.done():
            task.cancel()
        await asyncio.gather(task, stopper, return_exceptions=True)
    if task.cancelled():
        return None
    return task.result()


async def boxed(work: Awaitable[T]) -> tuple[T]:
    """`work`'s result in a 1-tuple, so that `until_stopped` tells a None result (boxed) from
    a stop (None)."""
    return (await work,)


class _PromptSource:
    """Prompts for one level, generated in batches as the level consumes them.

    A source whose requests depend on earlier ones (`PromptSource.after`: a conversation's
    next turn) is taken from with `take`: the lowest-numbered request whose predecessor has
    finished (`finished`), made when it is taken, waiting for a completion when none is
    ready."""

    def __init__(self, workload: Workload, level: int, count: int) -> None:
        self.workload = workload
        self.level = level
        self.count = count
        self.issued = 0
        self._buffer: list[Prompt] = []
        self._batches = 0
        source = workload.source
        self.dependent = source is not None and not source.timed and _has_dependencies(source)
        self._finished: set[int] = set()
        self._taken: set[int] = set()
        """Requests taken out of order: every one below `issued` is taken too."""
        self._changed: asyncio.Event | None = None

    def finished(self, index: int) -> None:
        """Request `index` has finished (or failed): the ones after it may go."""
        if self.dependent:
            self._finished.add(index)
            if self._changed is not None:
                self._changed.set()

    async def take(self, stop: asyncio.Event) -> tuple[int, Prompt] | None:
        """The next request to send: `next()` for independent prompts; for dependent ones
        the first that is ready, after waiting for a completion if none is. None past the
        level's count, or on a stop."""
        if not self.dependent:
            return self.next()
        while not stop.is_set():
            if self.issued >= self.count:
                return None
            ready = self._ready()
            if ready is not None:
                return ready
            if self._changed is None:
                self._changed = asyncio.Event()
            self._changed.clear()
            waiter = asyncio.ensure_future(self._changed.wait())
            stopper = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                stopper.cancel()
                await asyncio.gather(waiter, stopper, return_exceptions=True)
        return None

    def _ready(self) -> tuple[int, Prompt] | None:
        source = self.workload.source
        assert source is not None
        end = min(self.count, self.issued + DEPENDENT_LOOKAHEAD)
        for index in range(self.issued, end):
            if index in self._taken:
                continue
            before = source.after(index)
            if before is not None and before not in self._finished:
                continue
            self._taken.add(index)
            while self.issued in self._taken:
                self._taken.discard(self.issued)
                self.issued += 1
            return index, source.prompts(self.level, index, 1)[0]
        return None

    def next(self) -> tuple[int, Prompt] | None:
        if self.issued >= self.count:
            return None
        if not self._buffer:
            batch = batch_size(self.workload, self.count - self.issued)
            source = self.workload.source
            if source is not None and source.timed:
                # One at a time: each is made while waiting for its send time, never a batch
                # in one go that would hold up sends due meanwhile.
                batch = 1
            if source is not None:
                self._buffer = source.prompts(self.level, self.issued, batch)
                if not self._buffer:  # a trace's end
                    self.count = self.issued
                    return None
            else:
                self._buffer = self.workload.prompts(batch, level=self.level * 1000 + self._batches)
            self._batches += 1
        index = self.issued
        self.issued += 1
        return index, self._buffer.pop(0)


def _has_dependencies(source: PromptSource) -> bool:
    """Whether any of the source's first requests waits for another (`after`)."""
    return any(source.after(index) is not None for index in range(DEPENDENT_LOOKAHEAD))


class _Sender:
    """Sends a prompt to the target; `body` makes its request body ahead of the send."""

    def __init__(self, client: httpx.AsyncClient, target: Target, endpoint: Endpoint) -> None:
        self.client = client
        self.target = target
        self.endpoint = endpoint

    def body(self, prompt: Prompt) -> bytes:
        return encode_body(self.endpoint, prompt, self.target.model)

    async def __call__(self, prompt: Prompt, body: bytes | None = None) -> RequestResult:
        return await run_request(
            self.client,
            self.target.url,
            self.endpoint,
            prompt,
            model=self.target.model,
            headers=self.target.headers,
            time_scale=self.target.time_scale,
            body=body,
        )


def _sender(client: httpx.AsyncClient, target: Target, endpoint: Endpoint) -> _Sender:
    return _Sender(client, target, endpoint)


async def _sent(
    send: Callable[..., Any],
    prompt: Prompt,
    index: int,
    stop: asyncio.Event,
    keep: Callable[[int, RequestResult], None],
    body: bytes | None = None,
) -> RequestResult:
    """`send(prompt)` (with its request body when made ahead); a request cancelled by a stop
    is kept as `CANCELLED` first, so the run's files say it was in flight."""
    sent_wall = time.time()
    try:
        result: RequestResult = await (send(prompt) if body is None else send(prompt, body))
    except asyncio.CancelledError:
        if stop.is_set():
            with contextlib.suppress(Exception):
                keep(index, RequestResult(send_wall=sent_wall, error=CANCELLED))
        raise
    return result


async def _closed_loop(
    send: Callable[[Prompt], Any],
    prompts: _PromptSource,
    concurrency: int,
    deadline: float | None,
    stop: asyncio.Event,
    keep: Callable[[int, RequestResult], None],
) -> None:
    """`concurrency` workers, each sending its next request when the last one finishes."""
    failure: list[BaseException] = []

    async def worker() -> None:
        while not stop.is_set() and not failure:
            if deadline is not None and time.perf_counter() >= deadline:
                return
            item = await prompts.take(stop)
            if item is None or (deadline is not None and time.perf_counter() >= deadline):
                return
            index, prompt = item
            result = await _sent(send, prompt, index, stop, keep)
            prompts.finished(index)
            try:
                keep(index, result)
            except Exception as exc:  # results cannot be kept: stop the level
                failure.append(exc)
                return

    pending: set[asyncio.Task[None]] = {
        asyncio.create_task(worker()) for _ in range(max(1, concurrency))
    }
    stopper = asyncio.create_task(stop.wait())
    while pending:
        done, _ = await asyncio.wait(pending | {stopper}, return_when=asyncio.FIRST_COMPLETED)
        pending -= done
        if stop.is_set() or failure:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            break
    stopper.cancel()
    await asyncio.gather(stopper, return_exceptions=True)
    if failure:
        raise failure[0]


async def _trace_loop(
    send: _Sender,
    timed: TimedSender | None,
    prompts: _PromptSource,
    scale: float,
    deadline: float | None,
    stop: asyncio.Event,
    keep: Callable[[int, RequestResult], None],
) -> float:
    """Each prompt sent at its `at_s` on the trace's clock (divided by `scale`: the server's
    time scale times the replay speed-up), open loop. Send times are absolute against the
    trace clock's start on `perf_counter`, so a late send never delays the ones after it.

    Each request's task is made up to `REPLAY_LOOKAHEAD_S` ahead and makes its request body;
    `timed` (plain HTTP) then opens its connection and has its thread write the request at
    the send time, whatever this loop is busy with. Without it (HTTPS) the task sleeps to
    its send time on this loop. Returns the wall time the trace's clock started."""
    tasks: set[asyncio.Task[None]] = set()
    failure: list[BaseException] = []
    stopper = asyncio.ensure_future(stop.wait())
    item = prompts.next()
    # The trace's clock starts once its first prompt is ready.
    started_wall = time.time()
    start = time.perf_counter()

    async def one(index: int, prompt: Prompt, due: float) -> None:
        body = send.body(prompt)
        if timed is None:
            # Cancelled while asleep it was never sent: nothing is kept for it.
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            result = await _sent(send, prompt, index, stop, keep, body)
            result.send_late_s = result.send_wall - (started_wall + due - start)
        else:
            sent_at: list[float] = []
            try:
                result = await timed.send(timed.payload(body), due, sent_at.append)
                result.input_len = ids_sent(timed.endpoint, prompt)
            except asyncio.CancelledError:
                # Only a request already written is kept, as in flight.
                if stop.is_set() and sent_at:
                    with contextlib.suppress(Exception):
                        keep(index, RequestResult(send_wall=sent_at[0], error=CANCELLED))
                raise
        try:
            keep(index, result)
        except Exception as exc:  # results cannot be kept: stop the level
            failure.append(exc)

    while item is not None and not stop.is_set() and not failure:
        due = start + (item[1].at_s or 0.0) / scale
        if deadline is not None and due >= deadline:
            break
        early = due - REPLAY_LOOKAHEAD_S - time.perf_counter()
        if early > 0:
            await asyncio.wait({stopper}, timeout=early)
            if stop.is_set():
                break
        task = asyncio.create_task(one(*item, due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        item = prompts.next()
    if stop.is_set() or failure:
        for task in list(tasks):
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    stopper.cancel()
    await asyncio.gather(stopper, return_exceptions=True)
    if failure:
        raise failure[0]
    return started_wall


async def _open_loop(
    send: Callable[[Prompt], Any],
    prompts: _PromptSource,
    spec: LevelSpec,
    deadline: float | None,
    stop: asyncio.Event,
    keep: Callable[[int, RequestResult], None],
    time_scale: float = 1.0,
) -> None:
    """Poisson arrivals at `spec.rate` per server second (capped in flight by `concurrency`)."""
    rng = random.Random(f"arrivals:{spec.index}")
    limit = asyncio.Semaphore(spec.concurrency) if spec.concurrency else None
    tasks: set[asyncio.Task[None]] = set()
    rate = spec.rate or 1.0
    next_send = time.perf_counter()

    failure: list[BaseException] = []

    async def one(index: int, prompt: Prompt) -> None:
        if limit is not None:
            async with limit:
                result = await _sent(send, prompt, index, stop, keep)
        else:
            result = await _sent(send, prompt, index, stop, keep)
        prompts.finished(index)
        try:
            keep(index, result)
        except Exception as exc:  # results cannot be kept: stop the level
            failure.append(exc)

    while not stop.is_set() and not failure:
        # Independent prompts are made before the wait; a dependent one (a conversation's
        # next turn) is picked at its arrival, among those whose previous turn finished by
        # then, and an arrival with none ready waits for the next completion.
        item = None if prompts.dependent else prompts.next()
        if item is None and (not prompts.dependent or prompts.issued >= prompts.count):
            break
        # The rate is per server second, as every figure of the level is (a simulator may
        # run faster than life): the real gap is the drawn one over the time scale.
        next_send += rng.expovariate(rate) / time_scale if math.isfinite(rate) else 0.0
        if deadline is not None and next_send >= deadline:
            break
        delay = next_send - time.perf_counter()
        if delay > 0:
            try:
                await asyncio.wait_for(stop.wait(), delay)
                break
            except TimeoutError:
                pass
        if item is None:
            item = await prompts.take(stop)
            if item is None or (deadline is not None and time.perf_counter() >= deadline):
                break
        task = asyncio.create_task(one(*item))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    # The drain gives way to a stop too: the requests still in flight are cancelled.
    stopper = asyncio.ensure_future(stop.wait())
    while tasks and not stop.is_set() and not failure:
        await asyncio.wait({*tasks, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if stop.is_set() or failure:
        for task in list(tasks):
            task.cancel()
    await asyncio.gather(stopper, *tasks, return_exceptions=True)
    if failure:
        raise failure[0]
