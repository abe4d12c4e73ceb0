"""Several hosts on the command line: `ddconsole fleet` (one look at every host of hosts.toml)
and `ddconsole --host NAME VERB ...` (the verb run by that host's ddconsole over SSH, its
output and exit status relayed)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from console.cli import argtypes

if TYPE_CHECKING:
    from console.fleet.summary import HostSummary

FLEET_SCHEMA_VERSION = 1


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "fleet",
        parents=[common],
        help="one look at every host of hosts.toml: GPUs busy, servers, tok/s, sources",
        description="Reads every host of $XDG_CONFIG_HOME/ddconsole/hosts.toml (and this "
        "one, `local`) over its SSH link with `ddconsole metrics --watch --json` there, and "
        "prints each host's first reading, or why it has none (stale: the reason).",
    )
    parser.add_argument(
        "--interval",
        type=argtypes.interval_s,
        default=1.0,
        metavar="S",
        help="seconds between the hosts' readings (default 1, at least 0.05)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="give up on a host that has no reading after S s (default 30)",
    )
    parser.add_argument("--json", action="store_true", help="every host's summary as JSON")
    parser.set_defaults(handler=_fleet)


def _fleet(args: argparse.Namespace) -> int:
    import asyncio

    from console.cli.render import print_json
    from console.core.errors import UsageError
    from console.fleet.fleet import Fleet

    if not args.timeout > 0:
        raise UsageError("--timeout must be positive")
    fleet = Fleet.from_config(
        demo=bool(getattr(args, "demo", False)),
        interval_s=args.interval,
        backoff_initial_s=args.timeout,  # one look: a host that failed is not retried
    )

    async def look() -> list[HostSummary]:
        await fleet.start()
        try:
            await fleet.wait_settled(args.timeout)
            return fleet.summaries()
        finally:
            await asyncio.wait_for(fleet.stop(), 15)

    summaries = asyncio.run(look())
    if args.json:
        print_json(
            {
                "schema_version": FLEET_SCHEMA_VERSION,
                "hosts": [summary.to_json() for summary in summaries],
            }
        )
    else:
        _print(summaries)
    return 0


def _print(summaries: Sequence[HostSummary]) -> None:
    from console.cli.render import table

    rows = []
    for s in summaries:
        bad = [src for src in s.sources if src.state != "ok"]
        rows.append(
            [
                s.name,
                s.target,
                s.state,
                f"{s.gpus_busy}/{s.gpus_total}" if s.gpus_total is not None else "-",
                f"{s.servers_ready}/{len(s.servers)}",
                f"{s.tok_s:.1f}" if s.tok_s is not None else "-",
                f"{len(bad)} not ok" if bad else ("ok" if s.sources else "-"),
                f"{s.age_s:.1f}s" if s.age_s is not None else "-",
                s.reason or "",
            ]
        )
    print(
        table(
            ["HOST", "TARGET", "STATE", "GPUS BUSY", "READY", "TOK/S", "SOURCES", "AGE", "REASON"],
            rows,
        )
    )


# -- --host NAME: the verb on another host


def route_host(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """Point a parsed `--host NAME VERB ...` at that host: the verb's own handler is kept
    (read-only refuses it here too) and the handler becomes the relay. `--host local` runs
    here as if no --host were given."""
    from console.fleet.hosts import LOCAL

    if args.host == LOCAL:
        return
    args.remote_handler = getattr(args, "handler", None)
    args.remote_argv = strip_host(argv)
    args.handler = _remote


def strip_host(argv: Sequence[str]) -> list[str]:
    """`argv` without its first `--host NAME` (or `--host=NAME`): the global option, which
    comes before the verb; a verb's own `--host` (the simulator's) stays."""
    out = list(argv)
    for index, token in enumerate(out):
        if token == "--host":
            del out[index : index + 2]
            return out
        if token.startswith("--host="):
            del out[index]
            return out
    return out


def _remote(args: argparse.Namespace) -> int:
    import asyncio

    from console.cli.read_only import refuse_if_read_only
    from console.core.errors import UsageError
    from console.fleet.hosts import find_host, load_hosts
    from console.fleet.link import HostLink

    if args.remote_handler is None:
        raise UsageError(
            f"--host {args.host}: give a command to run there (e.g. `ddconsole --host "
            f"{args.host} ps`); `ddconsole` opens the console with every host in its fleet view"
        )
    refuse_if_read_only(args, args.remote_handler)
    host = find_host(load_hosts(), args.host)
    link = HostLink(host)

    async def relay() -> int:
        try:
            return await link.relay(args.remote_argv, sys.stdout, sys.stderr)
        finally:
            await link.close()

    return asyncio.run(relay())
