"""Dump SGLang's real `sglang serve` argument parser as data for the simulator.

Run with the python of the real sglang==0.5.23 venv (built by scripts/sglang-venv):

    "$(scripts/sglang-venv)" scripts/dump_sglang_cli.py > console/sim/data/sglang_cli_0.5.23.json

It builds the parser exactly as `prepare_server_args` does (sglang 0.5.23
srt/server_args.py:679-680: `argparse.ArgumentParser(prog="sglang serve")` then
`ServerArgs.add_cli_args(parser)`) and writes one record per action: its option strings,
destination, action kind, nargs, type name, choices, const and whether it is required, in
the parser's own order (argparse's abbreviation and usage text depend on it).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

KINDS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreConstAction": "store_const",
    "BooleanOptionalAction": "boolean_optional",
    "LoRAPathAction": "store",
    "DeprecatedStoreTrueAction": "store_true",
    "DeprecatedStoreConstAction": "store_const",
}


def _plain(value: Any) -> Any:
    """JSON-safe form of a default, const or choice value."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def dump() -> dict[str, Any]:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    actions = []
    for action in parser._actions:
        name = type(action).__name__
        if name == "_HelpAction":
            continue
        if name not in KINDS:
            raise SystemExit(f"unhandled argparse action {name} for {action.option_strings}")
        kind = KINDS[name]
        const = getattr(action, "const_value", action.const)
        choices = action.choices
        if isinstance(choices, set | frozenset):
            choices = sorted(choices)  # a set prints in hash order; sorted keeps the data stable
        actions.append(
            {
                "option_strings": list(action.option_strings),
                "dest": action.dest,
                "kind": kind,
                "nargs": action.nargs if kind in ("store", "store_const") else None,
                "type": getattr(action.type, "__name__", None) if action.type else None,
                "choices": [_plain(c) for c in choices] if choices is not None else None,
                "const": _plain(const) if kind == "store_const" else None,
                "required": bool(action.required),
                "metavar": action.metavar,
            }
        )
    import sglang

    return {"sglang_version": sglang.__version__, "prog": parser.prog, "actions": actions}


if __name__ == "__main__":
    json.dump(dump(), sys.stdout, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")
