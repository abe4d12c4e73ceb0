"""`ddconsole prune`: remove the records and logs of servers that ended long ago."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from console.cli.render import print_json, table


def _duration(text: str) -> float:
    from console.core.settings import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds > 3650 * 86400:
        raise argparse.ArgumentTypeError(f"{text} must be at most 3650d")
    return seconds


def register(verbs: Any, common: argparse.ArgumentParser) -> None:
    prune = verbs.add_parser(
        "prune",
        parents=[common],
        help="remove the records and logs of stopped servers that ended long ago",
        description="Removes the state records and log files of stopped or failed servers "
        "that ended longer ago than --older-than (default: the fold_stopped_after setting in "
        "$XDG_CONFIG_HOME/ddconsole/config.toml, 1h unless set). A running server is never "
        "touched. Asks first on a terminal; without one, --yes is required.",
    )
    prune.add_argument(
        "--older-than",
        type=_duration,
        metavar="DUR",
        help="servers that ended more than DUR ago: 90s, 15m, 1h, 2d; 0 for every ended one",
    )
    prune.add_argument("--yes", "-y", action="store_true", help="do not ask before removing")
    prune.add_argument(
        "--dry-run", action="store_true", help="list what would be removed; remove nothing"
    )
    prune.add_argument("--json", action="store_true", help="one result object per server")
    prune.set_defaults(handler=_prune)


def _say(args: argparse.Namespace, text: str) -> None:
    print(text, file=sys.stderr if args.json else sys.stdout, flush=True)


def _confirm(args: argparse.Namespace, count: int) -> bool:
    """Ask on a terminal; UsageError (exit 2) without one and without --yes."""
    from console.core.errors import UsageError

    what = f"{count} stopped server{'s' if count != 1 else ''}"
    if not sys.stdin.isatty():
        raise UsageError(
            f"prune removes the records and logs of {what}; confirm with --yes "
            "(or look first with --dry-run)"
        )
    stream = sys.stderr if args.json else sys.stdout
    stream.write(f"remove the records and logs of {what}? [y/N] ")
    stream.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _prune(args: argparse.Namespace) -> int:
    from console.cli.services import Services
    from console.core.settings import load_settings
    from console.core.units import format_duration
    from console.server.tidy import PruneResult, ended_wall, log_files, prune, split_folded

    older_than = args.older_than
    if older_than is None:
        older_than = load_settings().fold_stopped_after_s
    services = Services.create(demo=bool(getattr(args, "demo", False)))
    manager = services.manager()
    statuses, problems = manager.statuses(probe=False)
    for problem in problems:
        _say(args, f"! {problem}")
    now = time.time()
    _, chosen = split_folded(statuses, older_than, now)
    if not chosen:
        _say(args, f"nothing to prune: no server ended more than {format_duration(older_than)} ago")
        if args.json:
            print_json([])
        return 0
    rows = []
    for status in chosen:
        ended = ended_wall(status)
        logs = log_files(manager, status)
        rows.append(
            [
                status.id,
                status.state.value,
                f"{format_duration(now - ended)} ago" if ended is not None else "-",
                f"{len(logs)} log{'s' if len(logs) != 1 else ''}",
                status.reason or "",
            ]
        )
    verb = "removing" if args.yes else "would remove"  # until confirmed, nothing goes
    _say(args, f"{verb} {len(chosen)} stopped server{'s' if len(chosen) != 1 else ''}:")
    _say(args, table(["ID", "STATE", "ENDED", "LOGS", "REASON"], rows, indent="  "))
    results: list[PruneResult] = []
    if args.dry_run:
        for status in chosen:
            names = [str(path) for path in log_files(manager, status)]
            results.append(
                PruneResult(
                    status.id, status.state.value, ended_wall(status), names, "would remove"
                )
            )
    else:
        if not args.yes and not _confirm(args, len(chosen)):
            _say(args, "nothing removed")
            return 1
        for status in chosen:
            result = prune(manager, status.id)
            results.append(result)
            note = f" ({result.reason})" if result.reason else ""
            _say(args, f"{result.result} {result.id}{note}")
    if args.json:
        print_json([r.to_json() for r in results])
    return 1 if any(r.result == "kept" for r in results) else 0
