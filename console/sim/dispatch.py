"""Which DP rank takes a request: SGLang 0.5.23's data-parallel controller, and the DP faults.

`--load-balance-method` defaults to `auto`, which resolves to `round_robin` on a server that
is not a PD-disaggregation prefill node (sglang 0.5.23 srt/arg_groups/fields/parallel.py:91-102,
srt/arg_groups/serving_hook.py:217-235). Round robin walks the active workers and skips one
whose status is down (srt/managers/data_parallel_controller.py:880-899); it never looks at
load. `total_requests` and `total_tokens` send to the rank with the fewest requests (running
plus waiting) or tokens (DPBudget.dispatch, :121-154). Health checks keep their own round-robin
counter (:846-862).

Two faults make one rank starve or lag, as operators meet it on a DP server:
- `dp-starve:RANK`: the controller sends the rank nothing, as round robin skips a worker marked
  down; the rank idles at 0 tok/s while the others carry every request.
- `dp-slow:RANK[:FACTOR]`: the rank's forward passes take FACTOR (default 4) times as long (a
  throttled GPU, a degraded PCIe link, a NUMA-crossing replica). Round robin keeps giving it an
  equal share, so its requests pile up (running, queued) and decode slower than its peers'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from console.sim.clock import SimClock, StepTimer
from console.sim.options import Fault, SimOptions, dp_fault_rank

HEALTH_RID_PREFIX = "HEALTH_CHECK_"
"""The rid the simulator's /health probe carries; SGLang routes health checks apart."""
DP_SLOW_FACTOR = 4.0
"""How much slower a `dp-slow` rank's steps are when the fault names no factor: enough that
its lag stands out of batch-to-batch noise at any concurrency."""
LOAD_METHODS = ("round_robin", "total_requests", "total_tokens")


class RankLoad(Protocol):
    """What the dispatcher reads of a DP rank's scheduler (console.sim.engine.Engine)."""

    rank: int

    @property
    def used_tokens(self) -> int: ...

    @property
    def running(self) -> Sequence[object]: ...

    @property
    def waiting(self) -> Sequence[object]: ...


def _rank_arg(fault: Fault) -> int | None:
    return dp_fault_rank(fault)


def starved_ranks(options: SimOptions) -> frozenset[int]:
    """The ranks `dp-starve:RANK` faults take out of dispatch."""
    ranks = (_rank_arg(f) for f in options.faults if f.kind == "dp-starve")
    return frozenset(r for r in ranks if r is not None)


def slow_ranks(options: SimOptions) -> dict[int, float]:
    """Rank -> how many times slower its steps are, from `dp-slow:RANK[:FACTOR]` faults."""
    found: dict[int, float] = {}
    for fault in options.faults:
        if fault.kind != "dp-slow":
            continue
        rank = _rank_arg(fault)
        _, _, factor_text = fault.arg.partition(":")
        try:
            factor = float(factor_text) if factor_text else DP_SLOW_FACTOR
        except ValueError:
            factor = DP_SLOW_FACTOR
        if rank is not None and factor > 0:
            found[rank] = factor
    return found


def load_method(options: SimOptions) -> str:
    """The resolved `--load-balance-method`: `auto` (and the PD-only `follow_bootstrap_room`,
    which needs a router's bootstrap room) dispatch round robin here."""
    given = str(options.get("load_balance_method") or "auto")
    return given if given in LOAD_METHODS else "round_robin"


class SlowStepTimer(StepTimer):
    """A `dp-slow` rank's step pacing: every forward pass takes `factor` times as long."""

    def __init__(self, clock: SimClock, factor: float) -> None:
        super().__init__(clock)
        self.factor = factor

    async def wait(self, sim_seconds: float) -> None:
        await super().wait(sim_seconds * self.factor)


@dataclass
class Dispatcher:
    """The DP controller's choice of rank for each request. A `starved` rank (the
    `dp-starve` fault) is left out by every method and by health checks: SGLang's round robin
    skips a worker marked down (data_parallel_controller.py:880-899), while its load-aware
    methods and health checks do not look at worker status (:121-154, :846-862); the fault
    stands for a rank the controller never reaches, whatever the method."""

    method: str = "round_robin"
    starved: frozenset[int] = frozenset()
    _counter: int = 0
    _health_counter: int = 0

    def pick(self, ranks: Sequence[RankLoad], rid: str = "") -> int:
        """The index in `ranks` of the rank that takes this request."""
        active = [i for i, r in enumerate(ranks) if r.rank not in self.starved] or list(
            range(len(ranks))
        )
        if rid.startswith(HEALTH_RID_PREFIX):
            slot = active[self._health_counter % len(active)]
            self._health_counter = (self._health_counter + 1) % len(active)
            return slot
        if self.method == "total_requests":
            return min(active, key=lambda i: len(ranks[i].running) + len(ranks[i].waiting))
        if self.method == "total_tokens":
            return min(
                active,
                key=lambda i: (
                    ranks[i].used_tokens,
                    len(ranks[i].running) + len(ranks[i].waiting),
                ),
            )
        slot = active[self._counter % len(active)]
        self._counter = (self._counter + 1) % len(active)
        return slot


def meta_dp_rank(rank: int, dp: int) -> str:
    """The `dp_rank` member of every output's `meta_info`, as a JSON fragment to follow
    `cached_tokens`: each scheduler stamps its outputs with its DP rank, None without a DP
    controller (dp 1), and the tokenizer copies it whenever the list is non-empty, so a dp-1
    server sends `"dp_rank":null` (sglang 0.5.23
    srt/managers/scheduler_components/output_streamer.py:227-230, 719-723,
    srt/managers/tokenizer_manager.py:2616-2617; dp_rank None at srt/entrypoints/engine.py:946-954).
    The OpenAI endpoints do not carry it."""
    return f',"dp_rank":{rank if dp > 1 else "null"}'
