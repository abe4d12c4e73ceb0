"""SGLang 0.5.23's own `sglang serve` argument parser, rebuilt from data.

`data/sglang_cli_0.5.23.json` is the real parser dumped action by action by
scripts/dump_sglang_cli.py (run in the real sglang==0.5.23 venv). Rebuilding it with the
standard library's argparse, in the same order and with `prog="sglang serve"` and the default
allow_abbrev (sglang 0.5.23 srt/server_args.py:679-680), gives the real behaviour for free:
unknown flags and ambiguous prefixes fail with argparse's own messages, a unique prefix is
accepted, and there are no aliases the real parser lacks.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Any

CLI_DATA = "data/sglang_cli_0.5.23.json"

# The DDTree pull request's flag: the simulator also stands in for that build.
DDTREE_FLAGS: tuple[dict[str, Any], ...] = (
    {
        "option_strings": ["--speculative-ddtree-budget"],
        "dest": "speculative_ddtree_budget",
        "kind": "store",
        "nargs": None,
        "type": "int",
        "choices": None,
        "const": None,
        "required": False,
        "metavar": None,
    },
)


class ArgumentsError(Exception):
    """What argparse would print after `sglang serve: error: ` before exiting 2."""

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.usage = usage


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so the caller decides how to exit."""

    def error(self, message: str) -> Any:
        raise ArgumentsError(message, self.format_usage())


def nullable_str(value: str) -> str | None:
    """sglang 0.5.23 srt/utils/common.py:3388."""
    return None if not value or value == "None" else value


def human_readable_int(value: str) -> int:
    """sglang 0.5.23 srt/utils/common.py:3394: SI (k, M, G, T) and IEC (Ki, Mi, Gi, Ti)."""
    value = value.strip()
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in iec:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'."
                )
            return int(number) * iec[suffix]
        return int(Decimal(number) * si[suffix])
    return int(value)


def loads(value: str) -> Any:
    """json.loads under the name argparse prints in `invalid loads value`."""
    return json.loads(value)


def json_list_type(value: str) -> Any:
    """sglang 0.5.23 srt/utils/common.py:4818."""
    try:
        return json.loads(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list."
        ) from None


def parse_cuda_graph_backend_arg(value: str) -> str:
    """sglang 0.5.23 srt/model_executor/cuda_graph_config.py:237."""
    if value == "tc_piecewise":
        raise argparse.ArgumentTypeError(
            "tc_piecewise was removed; select breakable, full, or disabled"
        )
    return value


def parse_cuda_graph_config_arg(value: str) -> Any:
    """sglang 0.5.23 srt/model_executor/cuda_graph_config.py:246 (shape check only)."""
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(
            f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}"
        )
    return parsed


TYPES: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "nullable_str": nullable_str,
    "human_readable_int": human_readable_int,
    "loads": loads,
    "json_list_type": json_list_type,
    "parse_cuda_graph_backend_arg": parse_cuda_graph_backend_arg,
    "parse_cuda_graph_config_arg": parse_cuda_graph_config_arg,
}


class _StoreConstChoice(argparse.Action):
    """A deprecated valued flag that stores a constant (`--monokernel-backend amd`)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self.const_value = kwargs.pop("const_value")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, self.const_value)


@cache
def cli_data() -> dict[str, Any]:
    text = resources.files("console.sim").joinpath(CLI_DATA).read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def _add(parser: argparse.ArgumentParser, record: dict[str, Any]) -> None:
    strings = list(record["option_strings"])
    common: dict[str, Any] = {"dest": record["dest"], "required": record["required"]}
    kind = record["kind"]
    if kind == "store_true":
        parser.add_argument(*strings, action="store_true", **common)
        return
    if kind == "boolean_optional":
        positive = [s for s in strings if not s.startswith("--no-")]
        parser.add_argument(*positive, action=argparse.BooleanOptionalAction, **common)
        return
    if record["metavar"] is not None:
        common["metavar"] = record["metavar"]
    if record["choices"] is not None:
        common["choices"] = record["choices"]
    if kind == "store_const":
        parser.add_argument(
            *strings,
            action=_StoreConstChoice,
            nargs=record["nargs"],
            const_value=record["const"],
            **common,
        )
        return
    if record["type"] is not None:
        common["type"] = TYPES.get(record["type"], str)
    parser.add_argument(*strings, nargs=record["nargs"], **common)


def build_parser(with_ddtree: bool = True) -> argparse.ArgumentParser:
    """The real parser; `with_ddtree` adds the DDTree pull request's flag. Every default is
    SUPPRESS, so the namespace holds exactly the flags that were given."""
    data = cli_data()
    parser = _Parser(prog=data["prog"], argument_default=argparse.SUPPRESS)
    for record in data["actions"]:
        _add(parser, record)
    if with_ddtree:
        for record in DDTREE_FLAGS:
            _add(parser, record)
    return parser


def option_names() -> dict[str, str]:
    """Each destination's first option string, as SGLang's help lists it."""
    names: dict[str, str] = {}
    for record in (*cli_data()["actions"], *DDTREE_FLAGS):
        names.setdefault(record["dest"], record["option_strings"][0])
    return names
