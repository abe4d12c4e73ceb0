"""Plans checked against the simulator's copy of SGLang's parser: `profiles check --demo`
and the console's launch preview in demo mode.

In demo mode the simulator runs in place of SGLang, with SGLang 0.5.23's own `sglang serve`
parser rebuilt from data (console/sim/argparser.py) plus the DDTree pull request's flag, so
a plan that parses here is one the demo server accepts. This checks argument syntax
(unknown flags, ambiguous prefixes, bad values) and the speculative algorithm's name; the
semantic checks of a real SGLang (`prepare_server_args`) need a real install.
"""

from __future__ import annotations

import re

from console.profiles.flagcheck import FlagCheckResult, FlagProblem
from console.profiles.sglang_probe import drop_flag
from console.sim.argparser import ArgumentsError, build_parser, cli_data

SIMULATOR = "the simulator's copy of SGLang's parser"

ALGORITHMS = frozenset(
    {"DFLASH", "UNO", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM"}
    | {"NONE", "NEXTN", "DDTREE"}
)
"""Names `SpeculativeAlgorithm.from_string` takes (sglang 0.5.23
srt/speculative/spec_info.py:39-65, NEXTN from srt/speculative/spec_registry.py:183), plus the
DDTree pull request's, which the simulator stands in for."""

_ARGUMENT = re.compile(r"^argument (\S+?)(?:/\S+)?: ")
_AMBIGUOUS = re.compile(r"ambiguous option: (\S+?)(?:=\S*)? could match")


def sglang_version() -> str:
    """The SGLang release whose parser the simulator carries."""
    return str(cli_data().get("sglang_version", "0.5.23"))


def _algorithm(argv: list[str]) -> str | None:
    for index, token in enumerate(argv):
        if token == "--speculative-algorithm" and index + 1 < len(argv):
            return argv[index + 1]
        if token.startswith("--speculative-algorithm="):
            return token.split("=", 1)[1]
    return None


def check_one(argv: list[str]) -> list[FlagProblem]:
    """Every problem SGLang's parser (as the simulator has it) finds in `argv`: the flag
    at fault is dropped and the rest parsed again, so one bad flag hides no other."""
    problems: list[FlagProblem] = []
    remaining = list(argv)
    for _ in range(64):
        try:
            _, unknown = build_parser().parse_known_args(remaining)
        except ArgumentsError as exc:
            message = str(exc)
            ambiguous = _AMBIGUOUS.search(message)
            named = _ARGUMENT.search(message)
            flag = ambiguous[1] if ambiguous else named[1] if named else ""
            problems.append(FlagProblem("ambiguous" if ambiguous else "invalid", flag, message))
            shorter = drop_flag(remaining, flag) if flag else remaining
            if shorter == remaining:
                break
            remaining = shorter
            continue
        problems += [
            FlagProblem("unknown", token.split("=", 1)[0], f"unrecognized arguments: {token}")
            for token in unknown
            if token.startswith("-")
        ]
        break
    name = _algorithm(argv)
    if name is not None and name.upper() not in ALGORITHMS:
        problems.append(
            FlagProblem(
                "invalid",
                "--speculative-algorithm",
                f"unknown speculative algorithm {name!r}: Unknown speculative algorithm name: "
                f"{name}",
            )
        )
    return problems


def check_with_simulator(args_by_key: dict[str, list[str]]) -> dict[str, FlagCheckResult]:
    """`flagcheck.check_args`'s answer, from the simulator's parser instead of an install."""
    version = sglang_version()
    results: dict[str, FlagCheckResult] = {}
    for key, argv in args_by_key.items():
        problems = tuple(check_one(list(argv)))
        results[key] = FlagCheckResult(not problems, problems, version, SIMULATOR, cached=False)
    return results
