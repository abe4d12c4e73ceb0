"""`ddconsole export --prometheus [HOST]:PORT`: the console's own readings for a Prometheus.

Serves, on a loopback port, what no exporter has: each server's NUMA binding truth, every
telemetry source's state, and acceptance and tok/s per level of the latest benchmark run
(names in console/export/prom_exporter.py and docs/prometheus-export.md). `--stdout` prints
one exposition instead (for node_exporter's textfile collector, or a look).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from console.cli import argtypes

if TYPE_CHECKING:
    from console.bench.results import RunSummary
    from console.server.monitor import Monitor

LOOPBACK = ("127.0.0.1", "localhost")
RUNS_EVERY_S = 10.0
"""How often the latest run's summary is looked for again."""


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "export",
        parents=[common],
        help="serve the console's own readings (NUMA binding, source states, acceptance "
        "per level) as Prometheus metrics",
        description="Watches this host as `metrics --watch` does and serves what no exporter "
        "has as Prometheus metrics: ddconsole_numa_binding_*, ddconsole_source_state, "
        "ddconsole_run_* (see docs/prometheus-export.md). Binds loopback only.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--prometheus",
        metavar="[HOST]:PORT",
        help="serve /metrics on this loopback address, e.g. :9400 (until Ctrl-C)",
    )
    where.add_argument(
        "--stdout", action="store_true", help="print one exposition (text format) and exit"
    )
    parser.add_argument(
        "--interval",
        type=argtypes.interval_s,
        default=1.0,
        metavar="S",
        help="seconds between readings (default 1, at least 0.05)",
    )
    parser.set_defaults(handler=_export)


def listen_address(text: str) -> tuple[str, int]:
    """`:9400`, `127.0.0.1:9400` or `localhost:9400` -> (host, port); UsageError otherwise."""
    from console.core.errors import UsageError

    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError(f"--prometheus {text}: give a port as :PORT, e.g. :9400")
    host = host or "127.0.0.1"
    if host not in LOOPBACK:
        raise UsageError(
            f"--prometheus {text}: ddconsole serves loopback only (127.0.0.1); "
            "let your Prometheus scrape it locally or through a tunnel"
        )
    return ("127.0.0.1" if host == "localhost" else host), int(port_text)


def _export(args: argparse.Namespace) -> int:
    import asyncio

    from console.cli.services import Services

    address = None if args.stdout else listen_address(args.prometheus)
    services = Services.create(demo=bool(getattr(args, "demo", False)))
    monitor = services.monitor(interval_s=args.interval, histogram_every=0)
    return asyncio.run(_run(monitor, services.state.runs, address, args.interval))


def latest_summary(runs_root: Any) -> RunSummary | None:
    """The newest run whose summary is on disk and fresh (never rebuilt here)."""
    from console.bench.listing import DiskRuns

    disk = DiskRuns(runs_root)
    for row in reversed(disk.runs()):
        try:
            summary = disk.cached_summary(row.run_id)
        except (OSError, ValueError):
            continue
        if summary is not None:
            return summary
    return None


async def _run(
    monitor: Monitor, runs_root: Any, address: tuple[str, int] | None, interval_s: float
) -> int:
    import asyncio
    import contextlib
    import signal
    import time

    from prometheus_client import generate_latest, start_http_server

    from console.core.errors import ConsoleError
    from console.export.prom_exporter import Exposition, families, registry_of

    exposition = Exposition()
    registry = registry_of(exposition)
    if address is None:
        try:
            await monitor.once()
            exposition.update(families(monitor.store, latest_summary(runs_root)))
        finally:
            await monitor.stop()
        sys.stdout.write(generate_latest(registry).decode())
        return 0
    host, port = address
    try:
        httpd, _ = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        await monitor.stop()
        raise ConsoleError(
            f"--prometheus :{port}: cannot listen there ({exc.strerror or exc}); pick another port"
        ) from None
    print(f"serving ddconsole's metrics on http://{host}:{port}/metrics", file=sys.stderr)
    summary: RunSummary | None = None
    runs_read = -RUNS_EVERY_S
    # Ctrl-C and SIGTERM end the loop at once (the wait below gives way to them).
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await monitor.start()
        while not stop.is_set():
            if time.monotonic() - runs_read >= RUNS_EVERY_S:
                summary = latest_summary(runs_root)
                runs_read = time.monotonic()
            exposition.update(families(monitor.store, summary))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)
        return 0
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 0
    finally:
        httpd.shutdown()
        httpd.server_close()
        await monitor.stop()
