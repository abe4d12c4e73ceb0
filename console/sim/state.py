"""The simulated server's shared state: resolved arguments, engines, status, faults."""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from console.sim.catalog import ModelEntry
from console.sim.clock import SimClock
from console.sim.dispatch import Dispatcher
from console.sim.engine import Engine, SimRequest
from console.sim.options import SimOptions
from console.sim.perf import Decoding
from console.sim.prefix import NO_KEYS, PrefixKeys
from console.sim.stats import SimStats
from console.sim.text import TokenStream

VERSION = "0.5.23"


class Status(Enum):
    STARTING = "Starting"
    UP = "Up"
    DRAINING = "Draining"


# /server_info's `status` is the scheduler's init report, "ready" once it is serving
# (sglang 0.5.23 srt/managers/scheduler.py:1944); the Status above is /ready's view.
SERVER_INFO_STATUS = "ready"
# Flags of the simulator itself, left out of `launch_command` (SGLang never saw them).
SIM_ONLY_FLAGS = ("--sim-speed", "--sim-seed", "--sim-fault")


@dataclass
class SimState:
    options: SimOptions
    model: ModelEntry
    decode: Decoding
    clock: SimClock
    stats: SimStats
    engines: list[Engine]
    served_name: str
    tp: int
    dp: int
    max_running: int
    max_total_tokens: int
    resolved_args: dict[str, Any]
    status: Status = Status.STARTING
    startup_time: float = field(default_factory=time.time)
    _rid: itertools.count[int] = field(default_factory=itertools.count)
    dispatcher: Dispatcher = field(default_factory=Dispatcher)
    """The DP controller's choice of rank (round robin by default, as SGLang's)."""
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self.stats.priority_scheduling = bool(self.options.get("enable_priority_scheduling"))
        # The schedulers' metric clocks start now, as their collectors are created at init.
        self.stats.start(self.clock.now())

    @property
    def api_key(self) -> str | None:
        key = self.options.get("api_key")
        return str(key) if key else None

    @property
    def admin_api_key(self) -> str | None:
        key = self.options.get("admin_api_key")
        return str(key) if key else None

    @property
    def reasoning_parser(self) -> str | None:
        parser = self.options.get("reasoning_parser")
        return str(parser) if parser else None

    def priority_label(self, given: object) -> str:
        """A request's priority as its metric label: its own, else `--default-priority-value`,
        else None, which SGLang labels "None" (metrics_collector.py:66-76)."""
        if isinstance(given, int) and not isinstance(given, bool):
            return str(given)
        default = self.options.get("default_priority_value")
        return str(default) if isinstance(default, int) else "None"

    @property
    def ready(self) -> bool:
        return self.status is Status.UP

    def new_request(
        self,
        *,
        input_len: int,
        max_new: int,
        ignore_eos: bool,
        streaming: bool,
        rid: str | None = None,
        log_metrics: bool = True,
        arrival: float | None = None,
        priority: object = None,
        prefix: PrefixKeys = NO_KEYS,
    ) -> SimRequest:
        number = next(self._rid)
        stop_at = max_new
        if not ignore_eos:
            # Without ignore_eos the "model" stops on its own, like a real one would.
            stop_at = max(1, int(self.rng.expovariate(1 / 180.0)) + 1)
        return SimRequest(
            rid=rid or f"{number:032x}",
            input_len=max(1, input_len),
            max_new=max(1, max_new),
            stop_at=stop_at,
            streaming=streaming,
            tokens=TokenStream(self.options.seed * 7919 + number, self.model.vocab),
            arrival=self.clock.now() if arrival is None else arrival,
            log_metrics=log_metrics,
            priority=self.priority_label(priority),
            prefix=prefix,
        )

    def submit(self, request: SimRequest) -> Engine:
        engine = self.engines[self.dispatcher.pick(self.engines, request.rid)]
        engine.submit(request)
        return engine

    @property
    def idle(self) -> bool:
        return all(engine.idle for engine in self.engines)

    def server_info(self) -> dict[str, Any]:
        """The flat resolved arguments, `launch_command`, the scheduler's info and per-DP
        internal states (sglang 0.5.23 srt/utils/common.py:3584-3593,
        srt/entrypoints/http_server.py:863-893). Secrets are in clear, as real SGLang
        serves them (`resolved_dict`, srt/server_args.py:316-333)."""
        pp = self.options.get("pp_size")
        world_size = self.dp * self.tp * (pp if isinstance(pp, int) and pp > 0 else 1)
        internal_states = []
        for engine in self.engines:
            state: dict[str, Any] = {
                # compute_world_size = dp * tp * pp (srt/server_args.py:581-589,
                # srt/managers/scheduler_components/internal_state.py:65-71).
                "world_size": world_size,
                "startup_time": self.startup_time,
                "effective_max_running_requests_per_dp": self.max_running,
                "last_gen_throughput": self.stats.ranks[engine.rank].last_gen_throughput,
                "memory_usage": {
                    "weight": round(self.model.size_gb / self.tp, 2),
                    "kvcache": round(
                        self.max_total_tokens * self.model.kv_bytes_per_token / 1e9, 2
                    ),
                    "token_capacity": self.max_total_tokens,
                },
            }
            average = self.stats.avg_spec_accept_length(engine.rank)
            if average is not None:
                state["avg_spec_accept_length"] = average
            internal_states.append(state)
        resolved = dict(self.resolved_args)
        resolved["api_key"] = self.api_key
        resolved["admin_api_key"] = self.admin_api_key
        algorithm = resolved.get("speculative_algorithm")
        if algorithm in ("NEXTN", "EAGLE"):
            # NEXTN is an alias resolved to EAGLE (srt/arg_groups/speculative_hook.py:109-116).
            resolved["speculative_algorithm"] = "EAGLE"
        return {
            **resolved,
            "launch_command": launch_command(self.options.argv),
            "status": SERVER_INFO_STATUS,
            "max_total_num_tokens": self.max_total_tokens,
            "max_req_input_len": self.model.context_len - 1,
            "startup_time": self.startup_time,
            "internal_states": internal_states,
            "version": VERSION,
            "frontend": "python",
            "sim": {
                "speed": self.options.speed,
                "seed": self.options.seed,
                "faults": [f"{f.kind}:{f.arg}" if f.arg else f.kind for f in self.options.faults],
                "model_catalog_entry": self.model.key,
            },
        }


def launch_command(argv: tuple[str, ...]) -> str:
    """The arguments as given, joined by spaces, without the interpreter or module, API keys
    in clear; only a watermark config is redacted (sglang 0.5.23 srt/server_args.py:711-719,
    srt/sampling/watermarking/core.py:110-134)."""
    out: list[str] = []
    skip_next = redact_next = False
    for token in argv:
        if skip_next:
            skip_next = False
            continue
        flag = token.partition("=")[0]
        if flag in SIM_ONLY_FLAGS:
            skip_next = "=" not in token
            continue
        if redact_next:
            out.append("<redacted>")
            redact_next = False
            continue
        if flag == "--watermark-config":
            redact_next = "=" not in token
            out.append(token if redact_next else f"{flag}=<redacted>")
            continue
        out.append(token)
    return " ".join(out)
