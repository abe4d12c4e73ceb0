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
        "one, `local`) over its SSH link with `ddconsole metrics --watch --json` there (through "
        "its Prometheus where hosts.toml names one: `via URL`), and "
        "prints each host's first reading, or why it has none (the reason). Exits 0 when "
        "every host is up, 1 when any is not.",
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
            return [
                _unsettled(s, fleet.link_state(s.name), args.timeout) for s in fleet.summaries()
            ]
        finally:
            await asyncio.wait_for(fleet.stop(), 15)

    summaries = asyncio.run(look())
    via = {host.name: host.prometheus for host in fleet.hosts}
    if args.json:
        print_json(
            {
                "schema_version": FLEET_SCHEMA_VERSION,
                "hosts": [{**s.to_json(), "via": via.get(s.name)} for s in summaries],
            }
        )
    else:
        _print(summaries, via)
    return 0 if all(s.state == "up" for s in summaries) else 1


def _unsettled(summary: HostSummary, link_state: str, waited_s: float) -> HostSummary:
    """A host still without a reading when the look ended, with the reason it has none."""
    import dataclasses

    from console.fleet.hosts import LOCAL

    if summary.state != "connecting" or summary.reason:
        return summary
    if summary.name == LOCAL:
        why = f"no reading within {waited_s:g} s (`ddconsole metrics` here has not answered)"
    elif link_state == "up":
        why = (
            f"no reading within {waited_s:g} s (connected; `ddconsole metrics` there has "
            "not answered)"
        )
    else:
        why = f"still connecting after {waited_s:g} s"
    return dataclasses.replace(summary, reason=why)


def _print(summaries: Sequence[HostSummary], via: dict[str, str | None]) -> None:
    from console.cli.render import table

    rows = []
    for s in summaries:
        bad = [src for src in s.sources if src.state != "ok"]
        prometheus = via.get(s.name)
        rows.append(
            [
                s.name,
                s.target if prometheus is None else f"{s.target} via {prometheus}",
                s.state,
                f"{s.gpus_busy}/{s.gpus_total}" if s.gpus_total is not None else "-",
                f"{s.servers_ready}/{s.servers_total}" if s.age_s is not None else "-",
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
    here as if no --host were given. A --host given twice is refused when the handler runs
    (this is called while parsing, where an error would escape main's messages)."""
    from console.core.errors import UsageError
    from console.fleet.hosts import LOCAL

    try:
        remote_argv = strip_host(argv)
    except UsageError as exc:
        error = exc

        def refuse(_: argparse.Namespace) -> int:
            raise error

        args.handler = refuse
        return
    if args.host == LOCAL:
        return
    args.remote_handler = getattr(args, "handler", None)
    args.remote_argv = remote_argv
    args.handler = _remote


def strip_host(argv: Sequence[str]) -> list[str]:
    """`argv` without the global `--host NAME`, in every form argparse takes before the verb
    (`--host NAME`, `--host=NAME`, an abbreviation such as `--ho NAME`); what follows the verb
    is the verb's and stays. UsageError when --host is given more than once."""
    from console.cli.parser import build_parser
    from console.core.errors import UsageError

    options: dict[str, bool] = {}  # each global option: does it take a value
    verbs: set[str] = set()
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            verbs.update(action.choices)
        for option in action.option_strings:
            options[option] = action.nargs != 0
    out: list[str] = []
    found = 0
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--" or token in verbs or not token.startswith("-"):
            out.extend(argv[index:])
            break
        flag, eq, _ = token.partition("=")
        named = [o for o in options if o == flag] or [o for o in options if o.startswith(flag)]
        takes_value = len(named) == 1 and options[named[0]] and not eq
        if named == ["--host"]:
            found += 1
        else:
            out.append(token)
            if takes_value and index + 1 < len(argv):
                out.append(argv[index + 1])
        index += 2 if takes_value else 1
    if found > 1:
        raise UsageError("--host is given more than once: give it once, before the command")
    return out


def _remote(args: argparse.Namespace) -> int:
    import asyncio

    from console.cli.read_only import refuse_if_read_only
    from console.core.errors import UsageError
    from console.fleet.hosts import find_host, load_hosts
    from console.fleet.link import HostLink

    if args.remote_handler is None:
        # No verb: the console itself, there, on this terminal.
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise UsageError(
                f"--host {args.host}: the console there needs a terminal here; without one "
                f"give a command to run there (e.g. `ddconsole --host {args.host} ps`)"
            )
    else:
        refuse_if_read_only(args, args.remote_handler)
    host = find_host(load_hosts(), args.host)
    link = HostLink(host)

    async def relay() -> int:
        try:
            return await link.relay(args.remote_argv, sys.stdout, sys.stderr)
        finally:
            await link.close()

    return asyncio.run(relay())
