"""`ddconsole metrics --prometheus URL`: the same reading, its servers and GPUs from Prometheus.

The store is filled by a PrometheusSource (console.telemetry.prom_source) instead of the
host's GPU source and direct /metrics scrapes, and read back by the same `store_reading`, so
the JSON has the shape `metrics --url` gives, plus a `prometheus` object saying which server
was asked, the matcher set applied, the rate window used and each scrape target's health.

This host's managed servers are listed once each: a scrape target on one's port here reports
Prometheus' figures under the managed server's id, profile and state, and one no target
scrapes is listed with null figures and the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from console.cli.cmd_metrics import METRICS_SCHEMA_VERSION, _line, _print_reading
from console.cli.render import print_json
from console.core.errors import ConsoleError, UsageError
from console.telemetry.blocking import BlockingCaller, Stalled
from console.telemetry.hub import TelemetryHub
from console.telemetry.prom_match import ManagedEndpoint, MatcherSet, parse_matchers
from console.telemetry.prom_source import PrometheusSource
from console.telemetry.reading import SERVER_FIGURES, store_reading

if TYPE_CHECKING:
    from console.server.manager import ServerManager
    from console.server.status import ServerStatus
    from console.server.watch import ServerWatcher

NAMES_TIMEOUT_S = 2.0
"""This host's names are looked up once; a resolver slower than this leaves the hostname."""


def _check(args: argparse.Namespace) -> tuple[str, MatcherSet | None]:
    url = str(args.prometheus)
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--prometheus {url}: give a full URL such as http://127.0.0.1:9090")
    if args.url:
        raise UsageError(
            "--prometheus reads every server through Prometheus; leave out --url "
            "(or run `metrics --url` separately)"
        )
    text = getattr(args, "prometheus_match", None)
    if text is None:
        return url, None
    try:
        return url, parse_matchers(text)
    except ValueError as exc:
        raise UsageError(
            f"--prometheus-match {text}: {exc}", hint='e.g. {instance=~"gpu2(:[0-9]+)?"}'
        ) from exc


def prometheus_json(source: PrometheusSource) -> dict[str, Any]:
    return {
        "url": source.url,
        "match": None if source.matchers is None else source.matchers.text,
        "rate_window_s": source.rate_window_s,
        "scrape_interval_s": source.scrape_interval_s,
        "targets": [
            {
                "instance": t.instance,
                "job": t.job,
                "health": t.health,
                "last_error": t.last_error or None,
                "server_id": source.mapped.get(t.instance),
            }
            for t in source.targets
        ],
    }


class ManagedServers:
    """This host's managed servers as the Prometheus source maps them: their endpoints and
    lifecycle JSON, refreshed off the loop (state files, /proc, a /ready probe each)."""

    def __init__(self, manager: ServerManager, timeout_s: float) -> None:
        from console.server.watch import ServerWatcher

        self.manager = manager
        self.watcher: ServerWatcher = ServerWatcher(manager, probe_every=1)
        self._caller = BlockingCaller("servers", timeout_s)
        self.lifecycle: dict[str, dict[str, Any]] = {}
        self.endpoints: list[ManagedEndpoint] = []

    async def refresh(self) -> None:
        """Read the servers again; one past its deadline keeps the last list."""
        try:
            await self._caller.call(self.watcher.poll)
        except Stalled:
            return
        current = [s for s in self.watcher.current if not s.record.is_node]
        self.lifecycle = {s.id: s.to_json() for s in current}
        self.endpoints = managed_endpoints(current)

    def close(self) -> None:
        self._caller.close()
        self.watcher.close()
        self.manager.close()


def managed_endpoints(statuses: Iterable[ServerStatus]) -> list[ManagedEndpoint]:
    """What the Prometheus source maps targets to, live servers first: a port an old record
    shares belongs to the server on it now. A gang's non-head nodes serve no /metrics."""
    endpoints = [
        ManagedEndpoint(s.id, s.record.plan.port, live=not s.state.terminal)
        for s in statuses
        if not s.record.is_node
    ]
    return sorted(endpoints, key=lambda e: not e.live)


def this_host_names() -> list[str]:
    """This host's name, its fully qualified name and the addresses they resolve to."""
    names = {socket.gethostname()}
    names.add(socket.getfqdn())
    for name in sorted(names):
        try:
            for *_, address in socket.getaddrinfo(name, None):
                names.add(str(address[0]))
        except OSError:
            continue
    return sorted(n for n in names if n)


def name_this_host_later(source: PrometheusSource) -> None:
    """Give `source` this host's names without waiting on the resolver: the hostname at
    once, and this_host_names() from a daemon thread when it answers (the source reads
    `local_names` afresh each poll, and a rebound tuple is read whole)."""
    source.local_names = (socket.gethostname(),)

    def look() -> None:
        try:
            names = this_host_names()
        except OSError:
            return
        source.local_names = tuple(names)

    threading.Thread(target=look, name="ddconsole-host-names", daemon=True).start()


async def _local_names() -> list[str]:
    """this_host_names() on a daemon thread: a hung resolver neither holds the reading up
    past NAMES_TIMEOUT_S nor keeps the process from exiting."""
    loop = asyncio.get_running_loop()
    found: asyncio.Future[list[str]] = loop.create_future()

    def answer(names: list[str]) -> None:
        if not found.done():
            found.set_result(names)

    def look() -> None:
        try:
            names = this_host_names()
        except OSError:
            names = [socket.gethostname()]
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            loop.call_soon_threadsafe(answer, names)

    threading.Thread(target=look, name="ddconsole-host-names", daemon=True).start()
    try:
        return await asyncio.wait_for(found, NAMES_TIMEOUT_S)
    except TimeoutError:
        return [socket.gethostname()]


def _reading(
    hub: TelemetryHub,
    source: PrometheusSource,
    interval_s: float,
    lifecycle: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema_version": METRICS_SCHEMA_VERSION,
        "time": time.time(),
        **store_reading(hub.store, lifecycle),
        "interval_s": interval_s,
        "prometheus": prometheus_json(source),
    }
    for entry in data["servers"]:
        # A managed server no target scrapes has no sample: its figures are null, not absent.
        for key in SERVER_FIGURES:
            entry.setdefault(key, None)
    return data


def run_prometheus(args: argparse.Namespace) -> int:
    url, matchers = _check(args)
    return asyncio.run(_run(url, matchers, args))


def _managed(args: argparse.Namespace) -> ManagedServers | None:
    if args.no_managed:
        return None
    from console.cli.services import Services

    services = Services.create(demo=bool(getattr(args, "demo", False)))
    return ManagedServers(services.manager(), max(0.5, args.interval * 2))


async def _run(url: str, matchers: MatcherSet | None, args: argparse.Namespace) -> int:
    hub = TelemetryHub(interval_s=args.interval)
    managed = _managed(args)
    source = PrometheusSource(
        url,
        hub.client,
        interval_s=args.interval,
        matchers=matchers,
        managed=(lambda: managed.endpoints) if managed is not None else None,
        local_names=await _local_names(),
    )
    hub.poller.add(source)
    hub.add_cost()

    async def reading() -> dict[str, Any]:
        if managed is not None:
            await managed.refresh()
        return _reading(hub, source, args.interval, managed.lifecycle if managed else {})

    try:
        if managed is not None:
            await managed.refresh()  # before the first poll: no server is listed twice
        if args.once:
            # Prometheus keeps the history: one poll has rates over the window already.
            await hub.poll_all_once()
            if source.problem is not None:
                raise ConsoleError(source.problem)
            data = _reading(hub, source, args.interval, managed.lifecycle if managed else {})
            if args.json:
                print_json(data)
            else:
                _print_reading(data)
                _print_targets(data["prometheus"])
            return 0
        hub.start()
        await asyncio.sleep(args.interval * 1.1)
        while True:
            data = await reading()
            if args.json:
                print(json.dumps(data, default=str), flush=True)
            else:
                print(_line(data), flush=True)
            await asyncio.sleep(args.interval)
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 0
    finally:
        await hub.close()
        if managed is not None:
            managed.close()


def _print_targets(prometheus: dict[str, Any]) -> None:
    down = [t for t in prometheus["targets"] if t["health"] != "up"]
    print(
        f"\nPrometheus {prometheus['url']}: {len(prometheus['targets'])} targets, "
        f"rates over {prometheus['rate_window_s']:g} s"
    )
    for target in down:
        print(f"  {target['job']}/{target['instance']}: {target['health']} {target['last_error']}")
