"""The simulator's command line: SGLang's launch arguments plus its own `--sim-*` flags.

SGLang's flags go through SGLang 0.5.23's own parser, rebuilt from data (console.sim.argparser):
unknown flags and ambiguous prefixes exit 2 as they would on a real server. Flags the
simulator does not model are noted once in its log. Its own flags (exact names only) also
come from `DDCONSOLE_SIM_SPEED`, `_SEED` and `_FAULT`, so a plan's argv needs no change in
demo mode.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from console.sim.argparser import ArgumentsError, build_parser, option_names
from console.sim.crashes import LOAD_CRASHES

CRASH_KINDS = frozenset({*LOAD_CRASHES, "badflag"})
"""`crash-at-load:KIND`; a bare `crash-at-load` is `oom`."""
SIM_FLAGS = ("--sim-speed", "--sim-seed", "--sim-fault")
USAGE = "usage: sglang serve [-h] --model-path MODEL_PATH ...\n"

# Flags the simulator's behaviour depends on (SGLang field names).
MODELED = frozenset(
    {
        "model_path",
        "served_model_name",
        "host",
        "port",
        "tp_size",
        "nnodes",
        "node_rank",
        "dist_init_addr",
        "dist_timeout",
        "dp_size",
        "load_balance_method",
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
        "disable_radix_cache",
        "enable_cache_report",
        "stream_interval",
        # sglang 0.5.23 srt/arg_groups/fields/observability.py:104-115
        "bucket_time_to_first_token",
        "bucket_inter_token_latency",
        "bucket_e2e_request_latency",
    }
)

DP_FAULTS = ("dp-starve", "dp-slow")
"""`dp-starve:RANK`: the DP controller sends that rank nothing (round robin skips it, as it
skips a worker marked down); `dp-slow:RANK[:FACTOR]`: that rank's forward passes take FACTOR
times as long (default 4). See console.sim.dispatch."""

# Flags from the open DDTree pull request, unknown to a stock 0.5.23.
EXTRA_KNOWN = {"speculative_ddtree_budget": None}


class OptionsError(Exception):
    """Bad arguments: the simulator prints `usage` and `sglang serve: error: MESSAGE` and
    exits 2, as argparse does in SGLang (sglang 0.5.23 srt/server_args.py:679, 696)."""

    def __init__(self, message: str, usage: str = USAGE) -> None:
        super().__init__(message)
        self.usage = usage


def dp_fault_rank(fault: Fault) -> int | None:
    """The DP rank a `dp-starve:RANK` or `dp-slow:RANK[:FACTOR]` fault names."""
    head = fault.arg.split(":", 1)[0]
    return int(head) if head.isdigit() else None


def dp_fault_problem(faults: tuple[Fault, ...], dp: int) -> str | None:
    """Why the DP faults cannot apply to a server of `dp` ranks (None: they can)."""
    starved = set()
    for fault in faults:
        if fault.kind not in DP_FAULTS:
            continue
        rank = dp_fault_rank(fault)
        if rank is None:
            return f"{fault.kind} needs a DP rank ({fault.kind}:RANK)"
        if rank >= dp:
            return f"{fault.kind}:{rank} names no rank of a server with --dp-size {dp}"
        if fault.kind == "dp-slow" and ":" in fault.arg:
            factor = fault.arg.split(":", 1)[1]
            try:
                if float(factor) <= 0:
                    raise ValueError
            except ValueError:
                return f"dp-slow:{fault.arg}: the factor must be a positive number"
        if fault.kind == "dp-starve":
            starved.add(rank)
    if starved and len(starved) >= dp:
        return "dp-starve cannot take every DP rank out of dispatch"
    return None


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


def _sim_flags(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """Take the simulator's own `--sim-*` flags (exact names only) out of argv."""
    rest: list[str] = []
    found: dict[str, str] = {}
    index = 0
    while index < len(argv):
        token = argv[index]
        index += 1
        flag, equals, inline = token.partition("=")
        if flag not in SIM_FLAGS:
            rest.append(token)
            continue
        if equals:
            found[flag] = inline
        elif index < len(argv):
            found[flag] = argv[index]
            index += 1
        else:
            raise OptionsError(f"argument {flag}: expected one argument")
    return rest, found


def merge_config(argv: list[str]) -> list[str]:
    """`--config FILE.yaml` as SGLang 0.5.23 merges it: one file, a `.yaml`/`.yml` name that
    exists, its `key: value` pairs turned into `--key value` (`--key` for `true`) placed
    before the other arguments, so the command line wins (srt/server_args.py:682-689,
    srt/utils/server_args_config_parser.py:75-160, 185-210). Without PyYAML, the simulator
    reads the flat form: one `key: value` a line, the value plain or a double-quoted (JSON)
    string, as ddconsole writes the API key there (console/server/keypipe.py). Read once."""
    at = [i for i, arg in enumerate(argv) if arg == "--config"]
    if len(at) > 1:
        raise OptionsError("Multiple config files specified! Only one allowed.")
    if at[0] == len(argv) - 1:
        raise OptionsError("No config file specified after --config flag!")
    path = argv[at[0] + 1]
    suffix = os.path.splitext(path)[1]
    if suffix.lower() not in (".yaml", ".yml"):
        raise OptionsError(f"Config file must be YAML format, got: {suffix}")
    if not os.path.exists(path):
        raise OptionsError(f"Config file not found: {path}")
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise OptionsError(f"Failed to read config file {path}: {exc}") from None
    merged: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, colon, value = line.partition(":")
        value = value.strip()
        if not colon or not key.strip():
            raise OptionsError(f"{path}:{number}: expected `key: value`")
        if value.startswith('"'):
            try:
                value = str(json.loads(value))
            except ValueError:
                raise OptionsError(f"{path}:{number}: unreadable quoted value") from None
        if value.lower() == "true":
            merged.append(f"--{key.strip()}")
        elif value.lower() != "false":
            merged += [f"--{key.strip()}", value]
    return merged + argv[: at[0]] + argv[at[0] + 2 :]


def parse(argv: list[str], environ: dict[str, str] | None = None) -> SimOptions:
    env = os.environ if environ is None else environ
    known = default_server_args()
    known["model_path"] = None  # the dump was made with a placeholder path
    rest, sim = _sim_flags(list(argv))
    if rest and not rest[0].startswith("-"):
        # `sglang serve MODEL ...` (sglang 0.5.23 cli/serve.py:62-66).
        rest = ["--model-path", rest[0], *rest[1:]]
    if "--config" in rest:
        rest = merge_config(rest)
    try:
        given = vars(build_parser().parse_args(rest))
    except ArgumentsError as exc:
        raise OptionsError(str(exc), exc.usage) from None
    args = dict(known)
    args.update(given)
    names = option_names()
    unmodeled = [names[d] for d in given if d not in MODELED and d not in EXTRA_KNOWN]
    unknown = [names[d] for d in given if d in EXTRA_KNOWN]
    speed_text = sim.get("--sim-speed", env.get("DDCONSOLE_SIM_SPEED", "1"))
    seed_text = sim.get("--sim-seed", env.get("DDCONSOLE_SIM_SEED", "0"))
    fault_text = sim.get("--sim-fault", env.get("DDCONSOLE_SIM_FAULT", ""))
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
        if fault.kind == "crash-at-load" and fault.arg and fault.arg not in CRASH_KINDS:
            raise OptionsError(
                f"argument --sim-fault: unknown crash-at-load kind {fault.arg!r} "
                f"(valid: {', '.join(sorted(CRASH_KINDS))})"
            )
    problem = dp_fault_problem(faults, int(args.get("dp_size") or 1))
    if problem:
        raise OptionsError(f"argument --sim-fault: {problem}")
    return SimOptions(
        server_args=args,
        argv=tuple(argv),
        speed=speed,
        seed=seed,
        faults=faults,
        unmodeled=tuple(unmodeled),
        unknown=tuple(unknown),
    )


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
        "no-join",
        "runtime-oom",
        "misbind",
        "hold-capture",
        "prefill-oom",
        *DP_FAULTS,
    }
)
