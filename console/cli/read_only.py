"""Read-only on the command line: `--read-only` or `read_only = true` in config.toml refuse
the verbs that start, stop or change servers and runs, as the console refuses its actions
(a shared box's alias or setting is a promise, not a console-only hint)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from console.core.errors import UsageError
from console.core.settings import load_settings

CHANGING_VERBS = {
    ("console.cli.cmd_servers", "_up"): "up",
    ("console.cli.cmd_servers", "_down"): "down",
    ("console.cli.cmd_servers", "_restart"): "restart",
    ("console.cli.cmd_servers", "_switch"): "switch",
    ("console.cli.cmd_bench", "_bench"): "bench",
    ("console.cli.cmd_campaign", "_campaign"): "campaign",
    ("console.cli.cmd_runs", "_runs_stop"): "runs stop",
    ("console.cli.cmd_prune", "_prune"): "prune",
}
"""The verbs a read-only setting refuses, by their handler (module, function name)."""


def refuse_if_read_only(args: argparse.Namespace, handler: Callable[..., object]) -> None:
    """UsageError when `handler` changes servers or runs and this invocation is read-only."""
    verb = CHANGING_VERBS.get((handler.__module__, handler.__name__))
    if verb is None:
        return
    from console.core.via_host import ddconsole_command

    dd = ddconsole_command()
    if getattr(args, "read_only", False):
        raise UsageError(
            f"read-only (--read-only): `{dd} {verb}` starts, stops or changes work and is refused",
            hint="run it without --read-only",
        )
    try:
        settings = load_settings()
    except UsageError:
        return  # the verb itself says what is wrong with the file where it reads it
    if settings.read_only:
        raise UsageError(
            f"read-only (read_only = true in {settings.path}): `{dd} {verb}` starts, "
            "stops or changes work and is refused",
            hint=f"set read_only = false in {settings.path} to act from this account",
        )
