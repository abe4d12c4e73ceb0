"""Run inside a profile's SGLang interpreter: parse argvs with SGLang's own parser.

Standalone on purpose (imports nothing from ddconsole): `flagcheck` executes this file with
the profile's interpreter, sends `{"argvs": {key: [args...]}}` on stdin and reads one JSON
object from stdout: `{"version": ..., "results": {key: {"ok": bool, "problems": [...]}}}`.
With `--version-only` it prints just the installed SGLang version (fast: no torch import).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
from importlib import metadata
from typing import Any


class _ParserError(Exception):
    pass


def _raise(message: str) -> None:
    raise _ParserError(message)


def _new_parser(server_args_cls: Any) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang serve", exit_on_error=False)
    server_args_cls.add_cli_args(parser)
    parser.error = _raise  # type: ignore[method-assign,assignment]
    return parser


def drop_flag(argv: list[str], flag: str) -> list[str]:
    """Remove `flag` (or `flag=value`, or `flag value`) from argv (also used by the
    simulator's check, `console/sim/plancheck.py`)."""
    out: list[str] = []
    skip_value = False
    for index, token in enumerate(argv):
        if skip_value:
            skip_value = False
            if not token.startswith("-"):
                continue
        if token == flag:
            nxt = argv[index + 1] if index + 1 < len(argv) else None
            skip_value = nxt is not None and not nxt.startswith("-")
            continue
        if token.startswith(flag + "="):
            continue
        out.append(token)
    return out


def check_argv(argv: list[str]) -> dict[str, Any]:
    from sglang.srt.server_args import ServerArgs, prepare_server_args

    problems: list[dict[str, str]] = []
    remaining = list(argv)
    for _ in range(64):
        parser = _new_parser(ServerArgs)
        try:
            _, unknown = parser.parse_known_args(remaining)
        except argparse.ArgumentError as exc:
            flag = (exc.argument_name or "").split("/")[0]
            problems.append({"kind": "invalid", "flag": flag, "message": str(exc)})
            options = exc.argument_name.split("/") if exc.argument_name else []
            before = remaining
            for option in options:
                remaining = drop_flag(remaining, option)
            if remaining == before:
                break
            continue
        except _ParserError as exc:
            message = str(exc)
            match = re.search(r"ambiguous option: (\S+?)(?:=\S*)? could match", message)
            kind = "ambiguous" if match else "invalid"
            flag = match.group(1) if match else ""
            problems.append({"kind": kind, "flag": flag, "message": message})
            if not flag:
                break
            remaining = drop_flag(remaining, flag)
            continue
        for token in unknown:
            if token.startswith("-"):
                problems.append(
                    {
                        "kind": "unknown",
                        "flag": token.split("=", 1)[0],
                        "message": f"unrecognized arguments: {token}",
                    }
                )
        break
    if not problems:
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
                prepare_server_args(list(argv))
        except SystemExit:
            lines = [line for line in stderr.getvalue().splitlines() if line.strip()]
            problems.append(
                {"kind": "invalid", "flag": "", "message": lines[-1] if lines else "rejected"}
            )
    algorithm = _value_of(argv, "--speculative-algorithm")
    if algorithm is not None:
        problem = _check_algorithm(algorithm)
        if problem:
            problems.append(problem)
    return {"ok": not problems, "problems": problems}


def _value_of(argv: list[str], flag: str) -> str | None:
    for index, token in enumerate(argv):
        if token == flag and index + 1 < len(argv):
            return argv[index + 1]
        if token.startswith(flag + "="):
            return token.split("=", 1)[1]
    return None


def _check_algorithm(name: str) -> dict[str, str] | None:
    try:
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    except Exception as exc:  # a build without this module cannot be asked
        return {
            "kind": "unchecked",
            "flag": "--speculative-algorithm",
            "message": f"cannot import SpeculativeAlgorithm: {exc}",
        }
    try:
        SpeculativeAlgorithm.from_string(name)
    except Exception as exc:
        return {
            "kind": "invalid",
            "flag": "--speculative-algorithm",
            "message": f"unknown speculative algorithm {name!r}: {exc}",
        }
    return None


def main() -> int:
    version = metadata.version("sglang")
    if "--version-only" in sys.argv[1:]:
        print(json.dumps({"version": version}))
        return 0
    request = json.load(sys.stdin)
    real_stdout = sys.stdout
    # SGLang may print while importing or parsing; keep stdout for the one JSON answer.
    with contextlib.redirect_stdout(sys.stderr):
        results = {key: check_argv(list(argv)) for key, argv in request["argvs"].items()}
    real_stdout.write(json.dumps({"version": version, "results": results}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
