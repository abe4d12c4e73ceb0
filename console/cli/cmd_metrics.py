"""`ddconsole metrics --once|--watch`: GPU, host and server telemetry without the TUI."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from console.cli import argtypes
from console.cli.render import print_json, table

METRICS_SCHEMA_VERSION = 1
"""The version of `--json`'s shape, documented in docs/metrics.schema.json."""

if TYPE_CHECKING:
    from console.server.monitor import Monitor


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "metrics",
        parents=[common],
        help="read GPUs, host and servers once, or every interval",
        description="Reads every GPU (NVML), the host (psutil), each managed server and any "
        "--url SGLang server. --once takes two readings an interval apart so rates exist.",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--once", action="store_true", help="one complete reading")
    mode.add_argument("--watch", action="store_true", help="a line per interval (no TTY needed)")
    parser.add_argument(
        "--interval",
        type=argtypes.interval_s,
        default=1.0,
        metavar="S",
        help="seconds between readings (default 1, at least 0.05)",
    )
    parser.add_argument(
        "--url",
        action="append",
        default=[],
        metavar="URL",
        help="also read this SGLang server (repeatable); managed or not",
    )
    parser.add_argument(
        "--no-managed", action="store_true", help="only the --url servers, not the managed ones"
    )
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        help="read SGLang servers and GPUs (DCGM exporter, nvitop-exporter) through this "
        "Prometheus server instead of this host: rates over the last --interval seconds "
        "(at least four scrape intervals); --once answers at once; a scrape target on a "
        "managed server's port is listed as that server",
    )
    parser.add_argument(
        "--prometheus-match",
        metavar="MATCHERS",
        help="with --prometheus: only the series and targets these PromQL label matchers "
        "select, e.g. '{instance=~\"gpu2(:[0-9]+)?\"}' (one Prometheus serving several hosts)",
    )
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_metrics)


def _metrics(args: argparse.Namespace) -> int:
    import asyncio  # here, not at the top: completion builds this parser and wants it fast

    from console.cli.services import Services
    from console.core.errors import UsageError

    if args.interval <= 0:
        raise UsageError("--interval must be positive")
    for url in args.url:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--url {url}: give a full URL such as http://127.0.0.1:30000")
    if args.prometheus_match is not None and args.prometheus is None:
        raise UsageError("--prometheus-match selects within a Prometheus: give --prometheus URL")
    if args.prometheus is not None:
        from console.cli.prom_metrics import run_prometheus

        return run_prometheus(args)
    services = Services.create(demo=bool(getattr(args, "demo", False)))
    # --once reads latency buckets once (since each server started); --watch every tick, so
    # its window exists from the second one.
    monitor = services.monitor(
        urls=tuple(args.url),
        interval_s=args.interval,
        with_servers=not args.no_managed,
        histogram_every=0 if args.once else 1,
    )
    if args.once:
        return asyncio.run(_once(monitor, args))
    return asyncio.run(_watch(monitor, args))


async def _once(monitor: Monitor, args: argparse.Namespace) -> int:
    from console.server.monitor import reading

    try:
        await monitor.once()
        data = reading(monitor)
    finally:
        await monitor.stop()
    data = {"schema_version": METRICS_SCHEMA_VERSION, "time": time.time(), **data}
    data["interval_s"] = args.interval
    if args.json:
        print_json(data)
    else:
        _print_reading(data)
    return 0


def _fmt(value: Any, spec: str, scale: float = 1.0, suffix: str = "") -> str:
    if value is None:
        return "-"
    return f"{value * scale:{spec}}{suffix}"


def _print_reading(data: dict[str, Any]) -> None:  # a metrics reading's JSON, not run data
    from console.core.units import format_bytes, format_rate_bytes
    from console.telemetry.reading import latency_pair, latency_scope

    gpus = data["gpus"]
    if gpus:
        rows = []
        for gpu in gpus:
            if "util_pct" not in gpu:
                rows.append(
                    [
                        gpu["index"],
                        "-",
                        "-",
                        "-",
                        "-",
                        "-",
                        "-",
                        "-",
                        "-",
                        f"{gpu['state']}: {gpu['reason']}",
                    ]
                )
                continue
            link = (
                f"Gen{gpu['pcie_gen_current']}x{gpu['pcie_width_current']}/"
                f"Gen{gpu['pcie_gen_max']}x{gpu['pcie_width_max']}"
            )
            rows.append(
                [
                    gpu["index"],
                    gpu["numa_node"] if gpu["numa_node"] is not None else "-",
                    _fmt(gpu["util_pct"], ".0f", suffix="%"),
                    f"{format_bytes(gpu['mem_used_bytes'], 0)}/"
                    f"{format_bytes(gpu['mem_total_bytes'], 0)}",
                    _fmt(gpu["power_w"], ".0f", suffix="W"),
                    _fmt(gpu["temp_c"], ".0f", suffix="C"),
                    _fmt(gpu["sm_clock_mhz"], ".0f"),
                    f"{format_rate_bytes(gpu['pcie_rx_bytes_s'])} / "
                    f"{format_rate_bytes(gpu['pcie_tx_bytes_s'])}",
                    link,
                    ",".join(gpu["throttle_reasons"] or []) or "",
                ]
            )
        print(
            table(
                [
                    "GPU",
                    "NUMA",
                    "UTIL",
                    "MEMORY",
                    "POWER",
                    "TEMP",
                    "SM MHZ",
                    "PCIE RX / TX",
                    "LINK NOW/MAX",
                    "THROTTLE",
                ],
                rows,
            )
        )
    else:
        gpu_source = next((s for s in data["sources"] if s["name"] == "gpu"), None)
        print(f"GPUs: {gpu_source['reason'] if gpu_source else 'none'}")
    host = data["host"]
    if host:
        nodes = "  ".join(
            f"node {n['node']}: {_fmt(n['cpu_pct'], '.0f', suffix='%')}" for n in host["numa_nodes"]
        )
        print(
            f"\nhost CPU {_fmt(host['cpu_pct'], '.0f', suffix='%')} ({nodes}), memory "
            f"{format_bytes(host['mem_used_bytes'])}/{format_bytes(host['mem_total_bytes'])}"
        )
        for binding in host["bindings"]:
            verdict = "ok" if binding["matches"] else "MISMATCH"
            print(
                f"  {binding['server_id']}: intended NUMA {binding['intended_nodes']}, "
                f"actual {binding['actual_nodes']} ({verdict})"
            )
    if data["servers"]:
        rows = []
        for server in data["servers"]:
            source = server["metrics_source"]
            rows.append(
                [
                    server["id"],
                    server.get("state", "-"),
                    _fmt(server.get("tok_s"), ".1f"),
                    _fmt(server.get("running"), ".0f"),
                    _fmt(server.get("queued"), ".0f"),
                    _fmt(server.get("token_usage"), ".0f", 100, "%"),
                    _fmt(server.get("accept_length"), ".2f"),
                    latency_pair(server, "ttft"),
                    latency_pair(server, "itl"),
                    source["state"] + (f": {source['reason']}" if source["reason"] else ""),
                ]
            )
        print()
        print(
            table(
                [
                    "SERVER",
                    "STATE",
                    "TOK/S",
                    "RUN",
                    "QUEUE",
                    "KV",
                    "ACCEPT",
                    "TTFT P50/P99 MS",
                    "ITL P50/P99 MS",
                    "METRICS",
                ],
                rows,
            )
        )
        scopes = {latency_scope(server) for server in data["servers"]} - {""}
        if scopes:
            print("latency percentiles: " + "; ".join(sorted(scopes)))
    console = data["console"]
    if console:
        print(f"\nconsole: {_fmt(console['cpu_pct'], '.1f', suffix='%')} of one core")


async def _watch(monitor: Monitor, args: argparse.Namespace) -> int:
    import asyncio

    from console.server.monitor import reading

    await monitor.start()
    try:
        await asyncio.sleep(args.interval * 1.1)
        while True:
            data = {
                "schema_version": METRICS_SCHEMA_VERSION,
                "time": time.time(),
                **reading(monitor),
                "interval_s": args.interval,
            }
            if args.json:
                import json

                print(json.dumps(data, default=str), flush=True)
            else:
                print(_line(data), flush=True)
            await asyncio.sleep(args.interval)
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 0
    finally:
        await monitor.stop()


def _line(data: dict[str, Any]) -> str:  # a metrics reading's JSON, not run data
    from console.telemetry.reading import latency_pair

    parts = [time.strftime("%H:%M:%S")]
    utils = [g["util_pct"] for g in data["gpus"] if g.get("util_pct") is not None]
    if utils:
        parts.append(f"gpu util {sum(utils) / len(utils):.0f}% avg, max {max(utils):.0f}%")
    host = data["host"]
    if host:
        parts.append(f"host {_fmt(host['cpu_pct'], '.0f', suffix='%')}")
    for server in data["servers"]:
        parts.append(
            f"{server['id']} {_fmt(server.get('tok_s'), '.1f')} tok/s"
            f" acc {_fmt(server.get('accept_length'), '.2f')}"
            f" run {_fmt(server.get('running'), '.0f')} q {_fmt(server.get('queued'), '.0f')}"
            f" ttft p50/p99 {latency_pair(server, 'ttft')} ms"
            f" itl p50/p99 {latency_pair(server, 'itl')} ms"
            f" [{server['metrics_source']['state']}]"
        )
    return " | ".join(parts)
