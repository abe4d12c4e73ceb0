"""The simulator's command line: SGLang's launch arguments plus its own `--sim-*` flags.

Any SGLang 0.5.23 flag is accepted (it is checked against the real default argument set,
shipped as data); flags the simulator does not model are noted once in its log. Its own
flags also come from `DDCONSOLE_SIM_SPEED`, `_SEED` and `_FAULT`, so a plan's argv needs no
change in demo mode.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

SIM_FLAGS = ("--sim-speed", "--sim-seed", "--sim-fault")

# Flags the simulator's behaviour depends on (SGLang field names).
MODELED = frozenset(
    {
        "model_path",
        "served_model_name",
        "host",
        "port",
        "tp_size",
        "dp_size",
        "enable_metrics",
        "api_key",
        "admin_api_key",
        "max_running_requests",
        "numa_node",
        "mem_fraction_static",
        "decode_log_interval",
        "skip_server_warmup",
        "speculative_algorithm",
        "speculative_draft_model_path",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "speculative_ddtree_budget",
        "context_length",
        "mamba_radix_cache_strategy",
        "stream_interval",
    }
)

# Flags from the open DDTree pull request, unknown to a stock 0.5.23.
EXTRA_KNOWN = {"speculative_ddtree_budget": None}

ALIASES = {
    "model": "model_path",
    "tensor_parallel_size": "tp_size",
    "tp": "tp_size",
    "data_parallel_size": "dp_size",
    "dp": "dp_size",
    "speculative_draft_model": "speculative_draft_model_path",
}

INT_FIELDS = frozenset(
    {
        "port",
        "tp_size",
        "dp_size",
        "max_running_requests",
        "decode_log_interval",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "speculative_ddtree_budget",
        "context_length",
        "stream_interval",
    }
)
FLOAT_FIELDS = frozenset({"mem_fraction_static"})
CLI_NAMES = {"tp_size": "--tp-size/--tensor-parallel-size", "dp_size": "--dp-size"}


class OptionsError(Exception):
    """Bad arguments: the simulator exits 2 with an argparse-like message, as SGLang does."""


def default_server_args() -> dict[str, Any]:
    """SGLang 0.5.23's default ServerArgs (dumped from the real release) as plain data."""
    text = resources.files("console.sim").joinpath("data/server_args_0.5.23.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


@dataclass(frozen=True)
class Fault:
    kind: str
    arg: str = ""

    def number(self, default: float) -> float:
        try:
            return float(self.arg) if self.arg else default
        except ValueError:
            return default


@dataclass(frozen=True)
class SimOptions:
    server_args: dict[str, Any]
    argv: tuple[str, ...]
    speed: float
    seed: int
    faults: tuple[Fault, ...]
    unmodeled: tuple[str, ...]
    """SGLang flags given that the simulator accepts but does not model."""
    unknown: tuple[str, ...]
    """Flags a stock SGLang 0.5.23 would not know."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def fault(self, kind: str) -> Fault | None:
        for fault in self.faults:
            if fault.kind == kind:
                return fault
        return None

    def get(self, name: str) -> Any:
        return self.server_args.get(name)


def _flag_to_field(flag: str, known: dict[str, Any]) -> str | None:
    name = flag.lstrip("-").replace("-", "_")
    if name in known or name in EXTRA_KNOWN:
        return name
    if name in ALIASES:
        return ALIASES[name]
    # argparse's allow_abbrev: an unambiguous prefix names the flag.
    matches = [key for key in known if key.startswith(name)]
    return matches[0] if len(matches) == 1 else None


def _coerce(field_name: str, default: Any, values: list[str], flag: str) -> Any:
    def fail(kind: str, raw: str) -> OptionsError:
        cli = CLI_NAMES.get(field_name, flag)
        return OptionsError(f"argument {cli}: invalid {kind} value: {raw!r}")

    if not values:
        return True
    if field_name in INT_FIELDS or (isinstance(default, int) and not isinstance(default, bool)):
        try:
            return int(values[0]) if len(values) == 1 else [int(v) for v in values]
        except ValueError:
            raise fail("int", values[0]) from None
    if field_name in FLOAT_FIELDS or isinstance(default, float):
        try:
            return float(values[0])
        except ValueError:
            raise fail("float", values[0]) from None
    if field_name == "numa_node":
        try:
            return [int(v) for v in values]
        except ValueError:
            raise fail("int", values[0]) from None
    if isinstance(default, list) or len(values) > 1:
        return list(values)
    return values[0]


def parse(argv: list[str], environ: dict[str, str] | None = None) -> SimOptions:
    env = os.environ if environ is None else environ
    known = default_server_args()
    known["model_path"] = None  # the dump was made with a placeholder path
    args = dict(known)
    speed_text = env.get("DDCONSOLE_SIM_SPEED", "1")
    seed_text = env.get("DDCONSOLE_SIM_SEED", "0")
    fault_text = env.get("DDCONSOLE_SIM_FAULT", "")
    unmodeled: list[str] = []
    unknown: list[str] = []
    index = 0
    tokens = list(argv)
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if not token.startswith("--"):
            if "model_path" not in _given(args, known) and not token.startswith("-"):
                args["model_path"] = token  # `sglang serve MODEL` positional form
                continue
            raise OptionsError(f"unrecognized arguments: {token}")
        flag, _, inline = token.partition("=")
        values = [inline] if inline else []
        if not inline:
            while index < len(tokens) and not tokens[index].startswith("--"):
                values.append(tokens[index])
                index += 1
        if flag in SIM_FLAGS:
            if not values:
                raise OptionsError(f"argument {flag}: expected one argument")
            if flag == "--sim-speed":
                speed_text = values[0]
            elif flag == "--sim-seed":
                seed_text = values[0]
            else:
                fault_text = values[0]
            continue
        field_name = _flag_to_field(flag, known)
        if field_name is None:
            unknown.append(flag)
            continue
        if field_name not in known:
            unknown.append(flag)
        elif field_name not in MODELED:
            unmodeled.append(flag)
        args[field_name] = _coerce(field_name, known.get(field_name), values, flag)
    if not args.get("model_path") or args.get("model_path") is True:
        raise OptionsError("the following arguments are required: --model-path/--model")
    try:
        speed = float(speed_text)
    except ValueError:
        raise OptionsError(f"argument --sim-speed: invalid float value: {speed_text!r}") from None
    if speed < 0:
        raise OptionsError("argument --sim-speed: must be >= 0 (0 means no simulated delay)")
    try:
        seed = int(seed_text)
    except ValueError:
        raise OptionsError(f"argument --sim-seed: invalid int value: {seed_text!r}") from None
    faults = tuple(
        Fault(*(part.split(":", 1) if ":" in part else (part, "")))
        for part in (p.strip() for p in fault_text.split(","))
        if part
    )
    for fault in faults:
        if fault.kind not in FAULT_KINDS:
            raise OptionsError(
                f"argument --sim-fault: unknown fault {fault.kind!r} "
                f"(valid: {', '.join(sorted(FAULT_KINDS))})"
            )
    return SimOptions(
        server_args=args,
        argv=tuple(argv),
        speed=speed,
        seed=seed,
        faults=faults,
        unmodeled=tuple(dict.fromkeys(unmodeled)),
        unknown=tuple(dict.fromkeys(unknown)),
    )


def _given(args: dict[str, Any], known: dict[str, Any]) -> set[str]:
    return {key for key, value in args.items() if known.get(key) != value}


FAULT_KINDS = frozenset(
    {
        "slow-start",
        "crash-at-load",
        "crash-mid-stream",
        "hang",
        "bad-metrics",
        "metrics-nan",
        "metrics-reset",
        "metrics-500",
        "http-500",
        "orphans",
    }
)
