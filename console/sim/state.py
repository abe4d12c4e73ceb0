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
from console.sim.engine import Engine, SimRequest
from console.sim.options import SimOptions
from console.sim.perf import Decoding
from console.sim.stats import SimStats
from console.sim.text import TokenStream

VERSION = "0.5.23"


class Status(Enum):
    STARTING = "Starting"
    UP = "Up"
    DRAINING = "Draining"


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
    _dispatch: itertools.count[int] = field(default_factory=itertools.count)
    rng: random.Random = field(default_factory=random.Random)

    @property
    def api_key(self) -> str | None:
        key = self.options.get("api_key")
        return str(key) if key else None

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
        )

    def submit(self, request: SimRequest) -> Engine:
        engine = self.engines[next(self._dispatch) % len(self.engines)]
        engine.submit(request)
        return engine

    @property
    def idle(self) -> bool:
        return all(engine.idle for engine in self.engines)

    def server_info(self) -> dict[str, Any]:
        internal_states = []
        for engine in self.engines:
            state: dict[str, Any] = {
                "world_size": self.tp,
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
        return {
            **self.resolved_args,
            "launch_command": redacted_command(self.options.argv),
            "status": self.status.value,
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


def redacted_command(argv: tuple[str, ...]) -> str:
    out = []
    hide_next = False
    for token in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        flag, _, value = token.partition("=")
        if flag in ("--api-key", "--admin-api-key"):
            if value:
                out.append(f"{flag}=***")
            else:
                out.append(flag)
                hide_next = True
            continue
        out.append(token)
    return " ".join(["python3", "-m", "sglang.launch_server", *out])
