"""The argparse tree of `ddconsole`; each verb's module adds its own subparser."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from console import __version__
from console.cli import argtypes
from console.cli.helptext import fill_missing_help

_FLOAT_POLICY = {"grace": argtypes.grace_s, "timeout": argtypes.timeout_s}
"""Plain `type=float` flags by destination: the shared policy replaces them (`down --grace`,
`up --timeout`); any other plain float flag still refuses NaN and infinities."""


def closest(word: str, candidates: Sequence[str]) -> str | None:
    """The candidate a typo most likely meant (difflib's ratio, at least 0.6), or None."""
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


HABITS = {
    "status": "ps",
    "list": "ps",
    "start": "up",
    "launch": "up",
    "serve": "up",
    "stop": "down",
    "kill": "down",
    "log": "logs",
    "top": "metrics",
    "watch": "metrics",
    "benchmark": "bench",
}
"""Verbs other tools use for what a ddconsole verb does (`status` is `ps` here): a typo of
one of them is pointed at ddconsole's verb."""


def _did_you_mean(
    word: str, candidates: Sequence[str], habits: dict[str, str] | None = None
) -> str:
    habits = habits or {}
    guess = closest(word, [*candidates, *habits])
    if guess in habits:
        guess = habits[guess]
    return f"; did you mean {guess!r}?" if guess else ""


class ConsoleArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose type conversions never escape as tracebacks: whatever a
    `type=` function raises (MemoryError, OverflowError, ...) becomes the usual one-line usage
    error naming the flag, exit status 2. A mistyped verb, choice or flag is answered by the
    parser it was meant for, with the closest valid spelling."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(args) if args is not None else None
        parsed, extras = super().parse_known_args(args, namespace)
        # A verb's parser is run through parse_known_args: leftovers would reach the
        # top-level parser, which reports them with its own usage and no suggestion.
        if extras:
            self._unrecognized(extras)
        return parsed, extras

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed = super().parse_args(args, namespace)
        if getattr(parsed, "host", None) is not None:  # `--host NAME`: the verb runs there
            import sys

            from console.cli.cmd_fleet import route_host

            route_host(parsed, list(sys.argv[1:] if args is None else args))
        return parsed

    def error(self, message: str) -> NoReturn:
        # A missing required option is checked before leftovers are: a mistyped flag
        # (`bench --concurency 4`) is the likelier mistake, so it is named first.
        given = getattr(self, "_given", None)
        if "required" in message and given:
            options = [o for o in self._option_string_actions if o.startswith("--")]
            for token in given:
                flag = token.split("=", 1)[0]
                if flag.startswith("--") and not any(o.startswith(flag) for o in options):
                    self._given = None
                    super().error(f"unrecognized option {flag!r}{_did_you_mean(flag, options)}")
        super().error(message)

    def _unrecognized(self, extras: list[str]) -> None:
        options = [o for o in self._option_string_actions if o.startswith("--")]
        for token in extras:
            if token.startswith("-") and token != "-":
                flag = token.split("=", 1)[0]
                if flag == "--host" and self.prog != "ddconsole":
                    self.error(
                        "--host is given before the command, as `ddconsole --host NAME "
                        f"{self.prog.removeprefix('ddconsole ')} ...`"
                    )
                self.error(f"unrecognized option {flag!r}{_did_you_mean(flag, options)}")
        self.error(f"unrecognized arguments: {' '.join(extras)}")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        if isinstance(action, argparse._SubParsersAction):
            shown = [choice.dest for choice in action._choices_actions]
            top = self.prog == "ddconsole"
            habits = {k: v for k, v in HABITS.items() if v in shown} if top else None
            raise argparse.ArgumentError(
                None,
                f"unknown command {value!r}{_did_you_mean(str(value), shown, habits)} "
                f"(choose from {', '.join(shown)})",
            )
        names = [str(choice) for choice in action.choices]
        raise argparse.ArgumentError(
            action,
            f"invalid choice: {value!r}{_did_you_mean(str(value), names)} "
            f"(choose from {', '.join(names)})",
        )

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
        cmd_completion,
        cmd_diagnose,
        cmd_export,
        cmd_fleet,
        cmd_metrics,
        cmd_plan,
        cmd_profiles,
        cmd_prune,
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
        "--prometheus",
        metavar="URL",
        default=None,
        help="the console reads SGLang servers and GPUs through this Prometheus "
        "(e.g. http://127.0.0.1:9090) instead of this host's NVML",
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
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="show everything, change nothing (a shared box): the console refuses every "
        "action and up, down, restart, switch, bench, campaign, runs stop and prune are "
        "refused; read_only = true in config.toml does the same",
    )
    parser.add_argument(
        "--host",
        metavar="NAME",
        default=None,
        help="run the command on this host of hosts.toml over SSH, its output and exit "
        "status relayed (`local`: here); `ddconsole fleet` lists the hosts",
    )
    common = common_parent()
    verbs = parser.add_subparsers(title="commands", metavar="COMMAND")
    cmd_profiles.register(verbs, common)
    cmd_plan.register(verbs, common)
    cmd_servers.register(verbs, common)
    cmd_prune.register(verbs, common)
    cmd_diagnose.register(verbs, common)
    cmd_metrics.register(verbs, common)
    cmd_bench.register(verbs, common)
    cmd_campaign.register(verbs, common)
    cmd_runs.register(verbs, common)
    cmd_snapshot.register(verbs, common)
    cmd_export.register(verbs, common)
    cmd_fleet.register(verbs, common)
    cmd_sim.register(verbs, common)
    cmd_completion.register(verbs, common)
    runner.register(verbs, common)
    _apply_numeric_policy(parser)
    fill_missing_help(parser)
    return parser
