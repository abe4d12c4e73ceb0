"""`ddconsole metrics --prometheus URL`: the same reading, its servers and GPUs from Prometheus.

The store is filled by a PrometheusSource (console.telemetry.prom_source) instead of the
host's GPU source and direct /metrics scrapes, and read back by the same `store_reading`, so
the JSON has the shape `metrics --url` gives, plus a `prometheus` object saying which server
was asked, the rate window used and each scrape target's health.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from console.cli.cmd_metrics import METRICS_SCHEMA_VERSION, _line, _print_reading
from console.cli.render import print_json
from console.core.errors import ConsoleError, UsageError
from console.telemetry.hub import TelemetryHub
from console.telemetry.prom_source import PrometheusSource
from console.telemetry.reading import store_reading


def _check(args: argparse.Namespace) -> str:
    url = str(args.prometheus)
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--prometheus {url}: give a full URL such as http://127.0.0.1:9090")
    if args.url:
        raise UsageError(
            "--prometheus reads every server through Prometheus; leave out --url "
            "(or run `metrics --url` separately)"
        )
    return url


def prometheus_json(source: PrometheusSource) -> dict[str, Any]:
    return {
        "url": source.url,
        "rate_window_s": source.rate_window_s,
        "scrape_interval_s": source.scrape_interval_s,
        "targets": [
            {
                "instance": t.instance,
                "job": t.job,
                "health": t.health,
                "last_error": t.last_error or None,
            }
            for t in source.targets
        ],
    }


def _reading(hub: TelemetryHub, source: PrometheusSource, interval_s: float) -> dict[str, Any]:
    return {
        "schema_version": METRICS_SCHEMA_VERSION,
        "time": time.time(),
        **store_reading(hub.store, {}),
        "interval_s": interval_s,
        "prometheus": prometheus_json(source),
    }


def run_prometheus(args: argparse.Namespace) -> int:
    url = _check(args)
    return asyncio.run(_run(url, args))


async def _run(url: str, args: argparse.Namespace) -> int:
    hub = TelemetryHub(interval_s=args.interval)
    source = PrometheusSource(url, hub.client, interval_s=args.interval)
    hub.poller.add(source)
    hub.add_cost()
    try:
        if args.once:
            # Prometheus keeps the history: one poll has rates over the window already.
            await hub.poll_all_once()
            if source.problem is not None:
                raise ConsoleError(source.problem)
            data = _reading(hub, source, args.interval)
            if args.json:
                print_json(data)
            else:
                _print_reading(data)
                _print_targets(data["prometheus"])
            return 0
        hub.start()
        await asyncio.sleep(args.interval * 1.1)
        while True:
            data = _reading(hub, source, args.interval)
            if args.json:
                print(json.dumps(data, default=str), flush=True)
            else:
                print(_line(data), flush=True)
            await asyncio.sleep(args.interval)
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 0
    finally:
        await hub.close()


def _print_targets(prometheus: dict[str, Any]) -> None:
    down = [t for t in prometheus["targets"] if t["health"] != "up"]
    print(
        f"\nPrometheus {prometheus['url']}: {len(prometheus['targets'])} targets, "
        f"rates over {prometheus['rate_window_s']:g} s"
    )
    for target in down:
        print(f"  {target['job']}/{target['instance']}: {target['health']} {target['last_error']}")
