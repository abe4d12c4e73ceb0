"""The fleet: every host of hosts.toml, each with its link and a long-lived telemetry stream
(`ddconsole metrics --watch --json` run there), summarised for the fleet view and `fleet`.

Runs as tasks on the caller's loop. A host whose connection or stream is lost turns `stale`
with the reason and keeps its last figures while the stream is restarted with capped
exponential backoff; a line that cannot be read is skipped and counted. Nothing here blocks:
every connect, call and line has a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from console.fleet.hosts import Host, load_hosts
from console.fleet.link import CONNECTING, STALE, UP, HostLink, LinkDown, RemoteResult
from console.fleet.summary import HostSummary, ReadingFigures, figures

BACKOFF_INITIAL_S = 1.0
BACKOFF_MAX_S = 30.0
FIRST_READING_S = 45.0
"""How long a freshly started stream may take to its first line (a remote Python start on a
busy host, then one interval)."""

Listener = Callable[[HostSummary], None]
LocalReading = Callable[[], dict[str, Any] | None]
"""This host's reading, from the console's own monitor (None while it has none)."""


@dataclass
class _HostState:
    host: Host
    link: HostLink
    state: str = CONNECTING
    reason: str | None = None
    reading: dict[str, Any] | None = None
    figures: ReadingFigures = field(default_factory=ReadingFigures)
    updated_mono: float | None = None
    updated_wall: float | None = None
    parse_errors: int = 0
    task: asyncio.Task[None] | None = None
    next_try_mono: float | None = None
    """When a stale host's stream is tried again (None: not waiting to)."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    """Set to try a stale host again now instead of at `next_try_mono`."""


class Fleet:
    """Every host's link and telemetry; `start()` on a running loop, `stop()` to end."""

    def __init__(
        self,
        hosts: Sequence[Host],
        *,
        demo: bool = False,
        interval_s: float = 1.0,
        connect_timeout_s: float = 10.0,
        backoff_initial_s: float = BACKOFF_INITIAL_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        silence_s: float | None = None,
        local_reading: LocalReading | None = None,
    ) -> None:
        self.demo = demo
        self.interval_s = interval_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = max(backoff_max_s, backoff_initial_s)
        self.silence_s = silence_s if silence_s is not None else max(10.0, 5 * interval_s)
        """A stream silent this long after a reading is stale and restarted."""
        self.local_reading = local_reading
        """Where `local`'s readings come from when the console already watches this host:
        taken from it every interval instead of a second `metrics --watch` process scraping
        the same servers and GPUs again."""
        self.version = 0
        """Bumped on every change of any host (views re-render only when it moved)."""
        self._listeners: list[Listener] = []
        self._hosts: dict[str, _HostState] = {}
        for host in hosts:
            link = HostLink(host, connect_timeout_s=connect_timeout_s)
            self._hosts[host.name] = _HostState(host, link)

    @classmethod
    def from_config(cls, **options: Any) -> Fleet:
        """The fleet of hosts.toml (`local` always first); UsageError for a damaged file."""
        return cls(load_hosts(), **options)

    # -- lifecycle

    async def start(self) -> None:
        """Start every host's stream as a task on the running loop; returns at once."""
        for hs in self._hosts.values():
            if hs.task is None:
                hs.task = asyncio.create_task(self._watch(hs), name=f"fleet:{hs.host.name}")

    async def stop(self) -> None:
        """End the streams and close the links; servers on the hosts keep running."""
        tasks = [hs.task for hs in self._hosts.values() if hs.task is not None]
        for task in tasks:
            task.cancel()
        # gather: the streams' own cancellations are results here, while a cancellation of
        # the caller still ends this call.
        await asyncio.gather(*tasks, return_exceptions=True)
        for hs in self._hosts.values():
            hs.task = None
        await asyncio.gather(*(hs.link.close() for hs in self._hosts.values()))

    # -- reading

    @property
    def hosts(self) -> list[Host]:
        return [hs.host for hs in self._hosts.values()]

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(summary)` on the loop whenever a host changes; returns the
        function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return unsubscribe

    def summary(self, name: str) -> HostSummary:
        hs = self._hosts[name]
        now = time.monotonic()
        fig = hs.figures
        return HostSummary(
            name=hs.host.name,
            target=hs.host.target,
            state=hs.state,
            reason=hs.reason,
            gpus_busy=fig.gpus_busy,
            gpus_total=fig.gpus_total,
            servers=fig.servers,
            servers_ready=sum(1 for s in fig.servers if s.state == "ready"),
            tok_s=fig.tok_s,
            sources=fig.sources,
            age_s=None if hs.updated_mono is None else max(0.0, now - hs.updated_mono),
            updated_wall=hs.updated_wall,
            parse_errors=hs.parse_errors,
            next_try_s=None if hs.next_try_mono is None else max(0.0, hs.next_try_mono - now),
        )

    def summaries(self) -> list[HostSummary]:
        """Every host, in hosts.toml's order (`local` first)."""
        return [self.summary(name) for name in self._hosts]

    def reading(self, name: str) -> dict[str, Any] | None:
        """The host's latest full reading (`metrics --json`'s shape), None before the first."""
        return self._hosts[name].reading

    def link_state(self, name: str) -> str:
        """The host's connection: "up", "connecting" or "stale" (`local`: always "up")."""
        return self._hosts[name].link.state

    def settled(self) -> bool:
        """Every host has a reading or is stale: one look at the fleet is complete."""
        return all(hs.reading is not None or hs.state == STALE for hs in self._hosts.values())

    async def wait_settled(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.settled():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    # -- commands

    async def run(self, name: str, args: Sequence[str], timeout_s: float = 120.0) -> RemoteResult:
        """Run `ddconsole ARGS` on host `name` (with --demo when the fleet is a demo);
        LinkDown when the host cannot be reached or the call outlives `timeout_s`."""
        hs = self._hosts[name]
        return await hs.link.run(self._args(args), timeout_s)

    def _args(self, args: Sequence[str]) -> list[str]:
        # Before the verb, as the global option: after it, a verb that passes its arguments
        # on (`sim ...`, or anything after `--`) would get it as one of them.
        return ["--demo", *args] if self.demo and "--demo" not in args else list(args)

    # -- the stream of one host

    def _changed(self, hs: _HostState) -> None:
        self.version += 1
        if not self._listeners:
            return
        summary = self.summary(hs.host.name)
        for listener in list(self._listeners):
            try:
                listener(summary)
            except Exception:  # a view's bug must not end this host's telemetry
                continue

    def _set(self, hs: _HostState, state: str, reason: str | None) -> None:
        if (hs.state, hs.reason) != (state, reason):
            hs.state, hs.reason = state, reason
            self._changed(hs)

    def _take(self, hs: _HostState, line: bytes | str) -> bool:
        """Read one telemetry line into the host's reading; False when it was not one."""
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            data = None
        if not isinstance(data, dict):
            hs.parse_errors += 1
            return False
        self._take_reading(hs, data)
        return True

    def _take_reading(self, hs: _HostState, data: dict[str, Any]) -> None:
        hs.reading = data
        hs.figures = figures(data)
        hs.updated_mono = time.monotonic()
        wall = data.get("time")
        hs.updated_wall = float(wall) if isinstance(wall, int | float) else time.time()
        hs.state, hs.reason = UP, None
        self._changed(hs)

    async def _watch_local(self, hs: _HostState, local_reading: LocalReading) -> None:
        """`local` read from the console's own monitor once an interval."""
        while True:
            try:
                data = local_reading()
            except Exception as exc:  # the console's own reading failed: said, not raised
                self._set(hs, STALE, f"this host's reading failed: {type(exc).__name__}: {exc}")
            else:
                if data is not None:
                    self._take_reading(hs, {"time": time.time(), **data})
            await asyncio.sleep(self.interval_s)

    def stream_args(self, host: Host) -> list[str]:
        """The `metrics` command a host's stream runs there (through the host's Prometheus
        when hosts.toml names one)."""
        watch = ["metrics", "--watch", "--json", "--interval", f"{self.interval_s:g}"]
        return [*watch, *host.metrics_args()]

    async def _watch(self, hs: _HostState) -> None:
        if hs.host.is_local and self.local_reading is not None:
            await self._watch_local(hs, self.local_reading)
            return
        args = self._args(self.stream_args(hs.host))
        delay = self.backoff_initial_s
        lived_enough = max(self.backoff_max_s, 10 * self.interval_s)
        while True:
            started = time.monotonic()
            try:
                reason = await self._stream(hs, args)
            except LinkDown as exc:
                reason = hs.link.reason or exc.message
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # whatever a host sends, the console carries on
                await asyncio.sleep(0.1)  # a lost connection's reason arrives with it
                if hs.link.state == STALE and hs.link.reason:
                    reason = hs.link.reason
                else:
                    reason = f"telemetry failed: {type(exc).__name__}: {exc}"
            # Only a stream that ran a good while starts its backoff over: one that gives a
            # reading and dies at once would otherwise restart every second for ever.
            if time.monotonic() - started >= lived_enough:
                delay = self.backoff_initial_s
            self._set(hs, STALE, reason)
            hs.next_try_mono = time.monotonic() + delay
            hs.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hs.wake.wait(), delay)
            hs.next_try_mono = None
            delay = min(delay * 2, self.backoff_max_s)

    def retry_now(self, name: str) -> bool:
        """Try a stale host's stream again now rather than at the end of its backoff; False
        when it is not waiting to be tried."""
        hs = self._hosts[name]
        if hs.next_try_mono is None:
            return False
        hs.wake.set()
        return True

    async def _stream(self, hs: _HostState, args: list[str]) -> str:
        """Read the host's stream until it ends or falls silent; the reason it ended."""
        async with hs.link.lines(args) as stream:
            wait = max(FIRST_READING_S, self.silence_s)
            while True:
                try:
                    line = await asyncio.wait_for(stream.readline(), wait)
                except TimeoutError:
                    return f"no reading for {wait:.0f} s"
                except ValueError:  # a line over the reader's limit
                    hs.parse_errors += 1
                    continue
                if not line:
                    break
                if self._take(hs, line):
                    wait = self.silence_s
        await asyncio.sleep(0.1)  # a lost connection's reason arrives with it
        if hs.link.state == STALE and hs.link.reason:
            return hs.link.reason
        try:
            err = await asyncio.wait_for(stream.read_stderr(), 2)
        except Exception:
            err = ""
        text = err.decode(errors="replace") if isinstance(err, bytes) else str(err or "")
        last = text.strip().splitlines()[-1:] or ["the command exited"]
        return f"telemetry stream ended: {last[0][:200]}"
