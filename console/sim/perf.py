"""The simulator's performance model: step and prefill times, tokens committed per step.

Pure functions over catalog data. Times are simulated seconds; the engine divides them by
the speed factor when it sleeps.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from console.sim.catalog import ModelEntry, SpecEntry, architecture_defaults

GPUS_PER_NUMA_NODE = 4
ALLREDUCE_BASE_S = 25e-6
ALLREDUCE_PER_DOUBLING_S = 8e-6
NUMA_CROSSING_FACTOR = 1.6
PREFILL_OVERHEAD_S = 0.008
INTERNODE_ALLREDUCE_S = 60e-6
"""One all-reduce between nodes (a 400 Gb/s InfiniBand-class link), for models the catalog
gives no `internode_step_ms`: two per layer per step. Chosen, not measured."""


def internode_s(model: ModelEntry, nnodes: int) -> float:
    """What a step gains when the TP group spans `nnodes` nodes (0 on one node)."""
    if nnodes <= 1:
        return 0.0
    if model.internode_step_ms > 0:
        return model.internode_step_ms / 1000.0
    return 2 * model.layers * INTERNODE_ALLREDUCE_S


@dataclass(frozen=True)
class Decoding:
    """How one verify step behaves for this model, algorithm and TP layout."""

    algorithm: str
    """`off` for autoregressive decoding, else the speculative algorithm."""
    verify_width: int
    accept_mean: float
    max_commit: int
    step_s: float
    """Single-stream step time at this TP degree."""
    batch_alpha: float
    num_draft_tokens: int

    @property
    def speculative(self) -> bool:
        return self.algorithm != "off"


def allreduce_s(model: ModelEntry, tp: int, crosses_numa: bool) -> float:
    """Two all-reduces per layer over PCIe (NCCL), more when the group spans NUMA nodes."""
    if tp <= 1:
        return 0.0
    per_call = ALLREDUCE_BASE_S + ALLREDUCE_PER_DOUBLING_S * math.log2(tp)
    factor = NUMA_CROSSING_FACTOR if crosses_numa else 1.0
    return float(model.layers * 2 * per_call * factor)


def scale_to_tp(model: ModelEntry, ref_step_s: float, tp: int, crosses_numa: bool) -> float:
    """Move a step time measured at the model's reference TP degree to another one."""
    ref_crosses = model.ref_tp > GPUS_PER_NUMA_NODE
    compute = max(ref_step_s - allreduce_s(model, model.ref_tp, ref_crosses), 1e-4)
    cf = model.compute_fraction
    scaled = compute * (cf * model.ref_tp / tp + (1 - cf))
    return scaled + allreduce_s(model, tp, crosses_numa)


def _spec_entry(model: ModelEntry, algorithm: str, budget: int | None) -> SpecEntry | None:
    """The model's own entry, else its architecture's; DDTree takes the nearest budget."""
    for source in (model.spec, architecture_defaults(model.architecture)):
        matches = [entry for entry in source if entry.algorithm == algorithm]
        if not matches:
            continue
        if budget is None:
            return matches[0]
        return min(matches, key=lambda entry: abs((entry.budget or 0) - budget))
    return None


def decoding(
    model: ModelEntry,
    *,
    tp: int,
    crosses_numa: bool,
    algorithm: str | None,
    num_draft_tokens: int | None,
    num_steps: int | None,
    ddtree_budget: int | None,
    nnodes: int = 1,
) -> Decoding:
    between = internode_s(model, nnodes)
    ar_step = scale_to_tp(model, model.ref_step_ms / 1000.0, tp, crosses_numa) + between
    name = (algorithm or "off").upper()
    if name in ("OFF", "NONE", ""):
        return Decoding("off", 1, 1.0, 1, ar_step, model.batch_alpha, 1)
    budget = ddtree_budget if name == "DDTREE" else None
    entry = _spec_entry(model, name, budget)
    if name == "DDTREE":
        width = (budget or 15) + 1
    elif name in ("DFLASH", "DSPARK"):
        width = num_draft_tokens or 16
    else:
        width = num_draft_tokens or ((num_steps or 3) + 1)
    if entry is None:
        # Unlisted combination: a modest generic drafter.
        accept = 1.0 + 0.55 * min(width - 1, 6)
        max_commit = width + 1 if name == "DDTREE" else width
        step = ar_step * (1.0 + 0.06 * width)
    else:
        accept = entry.accept
        max_commit = entry.max_commit
        if entry.step_ms is not None:
            step = scale_to_tp(model, entry.step_ms / 1000.0, tp, crosses_numa) + between
        else:
            step = ar_step * (entry.step_x or 1.0)
    alpha = min(1.0, model.batch_alpha * (1.0 + 0.05 * (width - 1)))
    return Decoding(name, width, accept, max(1, max_commit), step, alpha, width)


def step_time(decode: Decoding, batch: int) -> float:
    """One decode (verify) step for `batch` running requests."""
    return decode.step_s * (1.0 + decode.batch_alpha * max(0, batch - 1))


def prefill_time(model: ModelEntry, tp: int, tokens: int) -> float:
    """One prefill batch: fixed overhead plus tokens at the model's prefill rate (scaled by TP)."""
    rate: float = model.prefill_tok_s * max(1.0, tp / model.ref_tp) ** 0.85
    return PREFILL_OVERHEAD_S + tokens / rate


def draw_commit(rng: random.Random, decode: Decoding) -> tuple[int, int]:
    """Tokens committed by one verify step (bonus included) and drafts accepted.

    `1 + Binomial(max_commit - 1, p)` with p chosen so the mean is the calibrated acceptance.
    The drafts accepted are the committed tokens less the bonus token, as SGLang counts them:
    each verify step commits the accepted drafts plus the bonus and adds its correct drafts
    to the request's histogram (sglang 0.5.23
    srt/managers/scheduler_components/batch_result_processor.py:829-836).
    """
    if not decode.speculative or decode.max_commit <= 1:
        return 1, 0
    trials = decode.max_commit - 1
    p = min(1.0, max(0.0, (decode.accept_mean - 1.0) / trials))
    accepted = sum(1 for _ in range(trials) if rng.random() < p)
    return 1 + accepted, accepted
