"""The argparse tree of `ddconsole`; each verb's module adds its own subparser."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from console import __version__
from console.cli import argtypes

_FLOAT_POLICY = {"grace": argtypes.grace_s, "timeout": argtypes.timeout_s}
"""Plain `type=float` flags by destination: the shared policy replaces them (`down --grace`,
`up --timeout`); any other plain float flag still refuses NaN and infinities."""


class ConsoleArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose type conversions never escape as tracebacks: whatever a
    `type=` function raises (MemoryError, OverflowError, ...) becomes the usual one-line usage
    error naming the flag, exit status 2."""

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError:
            raise
        except Exception as exc:
            raise argparse.ArgumentError(
                action, f"invalid value {arg_string[:80]!r}: {type(exc).__name__}"
            ) from None


def _actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)


def _apply_numeric_policy(parser: argparse.ArgumentParser) -> None:
    for action in _actions(parser):
        if action.type is float:
            action.type = _FLOAT_POLICY.get(action.dest, argtypes.finite_float)


def common_parent() -> argparse.ArgumentParser:
    """Flags every verb accepts after its name too (`ddconsole plan ... --demo`)."""
    parent = ConsoleArgumentParser(add_help=False)
    parent.add_argument(
        "--demo",
        action="store_true",
        default=argparse.SUPPRESS,
        help="use the built-in simulator and a simulated 8-GPU host (no GPU needed)",
    )
    return parent


def build_parser() -> argparse.ArgumentParser:
    from console.cli import (
        cmd_bench,
        cmd_campaign,
        cmd_diagnose,
        cmd_metrics,
        cmd_plan,
        cmd_profiles,
        cmd_runs,
        cmd_servers,
        cmd_sim,
        cmd_snapshot,
        runner,
    )

    parser = ConsoleArgumentParser(
        prog="ddconsole",
        description=(
            "Launch, watch and benchmark SGLang servers on multi-GPU hosts. "
            "Without a command, opens the console (TUI)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"ddconsole {__version__}")
    parser.add_argument(
        "--demo",
        action="store_true",
        default=False,
        help="use the built-in simulator and a simulated 8-GPU host (no GPU needed)",
    )
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="the console does not keep a flight recording of this session",
    )
    parser.add_argument(
        "--record-max-mb",
        type=argtypes.record_max_mb,
        default=256,
        metavar="MB",
        help="size limit of the recordings folder; the oldest go first (default 256)",
    )
    common = common_parent()
    verbs = parser.add_subparsers(title="commands", metavar="COMMAND")
    cmd_profiles.register(verbs, common)
    cmd_plan.register(verbs, common)
    cmd_servers.register(verbs, common)
    cmd_diagnose.register(verbs, common)
    cmd_metrics.register(verbs, common)
    cmd_bench.register(verbs, common)
    cmd_campaign.register(verbs, common)
    cmd_runs.register(verbs, common)
    cmd_snapshot.register(verbs, common)
    cmd_sim.register(verbs, common)
    runner.register(verbs, common)
    _apply_numeric_policy(parser)
    return parser
