"""`GET /v1/loads`: per-DP-rank load, as SGLang 0.5.23 serves it and smg's load monitor asks
for it (`/v1/loads?include=core,disagg,queues,memory`).

The shape follows srt/entrypoints/v1_loads.py:96-147 (timestamp, version, accelerator,
num_accelerators, loads) and each rank's `LoadSnapshot.to_dict` (srt/managers/
load_snapshot.py:232-257): every core field, then the sections asked for that the snapshot
has, in the struct's order (memory, speculative, lora, disaggregation, queues). The snapshot
is built as srt/managers/scheduler_components/load_inquirer.py:109-255 builds it for a
server without PD disaggregation or LoRA: `disaggregation` is always there with mode "null"
and zeros (:184-216), `lora` never, `speculative` only once a draft has run a forward
(:163-174), and the waiting requests' tokens count in `num_total_tokens` (:115, :145-147).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from console.hw.simulated import GPU_NAME
from console.sim.state import VERSION

if TYPE_CHECKING:
    from console.sim.state import SimState

VALID_SECTIONS = frozenset({"core", "memory", "spec", "lora", "disagg", "queues", "all"})
"""LoadSnapshot.VALID_SECTIONS (load_snapshot.py:228-230)."""


class LoadsError(ValueError):
    """An include section LoadSnapshot.to_dict rejects (load_snapshot.py:238-242). It is
    raised outside the route's try (v1_loads.py:121-131, 141-144) and no handler takes a
    ValueError, so the server answers a bare 500 (only when some rank's load is built)."""


def _rank_load(state: SimState, rank: int, include: set[str] | None) -> dict[str, Any]:
    engine = state.engines[rank]
    totals = state.stats.ranks[rank]
    used = engine.used_tokens
    capacity = engine.max_total_tokens
    waiting_uncached = sum(r.input_len for r in engine.waiting)
    # The waiting requests' seqlen (their prompts) on top of the pool's used tokens; no
    # KV transfer is awaited outside disaggregated decode, so active equals total.
    total = used + sum(r.input_len for r in engine.waiting)
    load: dict[str, Any] = {
        "timestamp": time.time(),
        "dp_rank": rank,
        "num_running_reqs": len(engine.running),
        "num_waiting_reqs": len(engine.waiting),
        "num_waiting_uncached_tokens": waiting_uncached,
        "num_used_tokens": used,
        "num_total_tokens": total,
        "num_active_tokens": total,
        "num_prealloc_ready_tokens": 0,
        "max_total_num_tokens": capacity,
        "max_running_requests": state.max_running,
        "token_usage": round(used / max(1, capacity), 4),
        "gen_throughput": totals.last_gen_throughput,
        "cache_hit_rate": totals.cache_hit_rate,
        "utilization": 0.0,
        "total_prefill_uncached_tokens": 0,
        "total_prefill_busy_us": 0,
        "decode_moments": None,
    }
    if include is not None and "all" not in include:
        if not include <= VALID_SECTIONS:
            raise LoadsError(
                f"Invalid include sections: {include - VALID_SECTIONS}. "
                f"Valid options: {sorted(VALID_SECTIONS)}"
            )
        if include == {"core"}:
            return load

    def asked(section: str) -> bool:
        return include is None or "all" in include or section in include

    if asked("memory"):
        load["memory"] = {
            "weight_gb": round(state.model.size_gb / state.tp, 2),
            "kv_cache_gb": round(capacity * state.model.kv_bytes_per_token / 1e9, 2),
            "graph_gb": 0.0,
            "token_capacity": capacity,
        }
    accept_length = state.stats.avg_spec_accept_length(rank)
    if accept_length is not None and asked("spec"):
        load["speculative"] = {"accept_length": accept_length, "accept_rate": totals.accept_rate}
    if asked("disagg"):
        load["disaggregation"] = {
            "mode": "null",
            "prefill_bootstrap_queue_reqs": 0,
            "prefill_inflight_queue_reqs": 0,
            "decode_prealloc_queue_reqs": 0,
            "decode_transfer_queue_reqs": 0,
            "decode_retracted_queue_reqs": 0,
            "kv_transfer_speed_gb_s": 0.0,
            "kv_transfer_latency_ms": 0.0,
        }
    if asked("queues"):
        load["queues"] = {
            "waiting": len(engine.waiting),
            "grammar": 0,
            "paused": 0,
            "retracted": 0,
            "prealloc_ready": 0,
        }
    return load


def loads(state: SimState, include: str | None, dp_rank: int | None) -> dict[str, Any]:
    """The `/v1/loads` JSON; LoadsError for an unknown include section."""
    sections = {s.strip() for s in include.split(",")} if include else None
    ranks = range(len(state.engines))
    pp = state.options.get("pp_size")
    if dp_rank is not None:
        ranks = range(dp_rank, dp_rank + 1) if 0 <= dp_rank < len(state.engines) else range(0)
    return {
        "timestamp": datetime.now(UTC).isoformat(),
        "version": VERSION,
        "accelerator": GPU_NAME,
        # tp x pp per DP rank (v1_loads.py:43-54); no attention-DP in the simulator.
        "num_accelerators": state.tp * (pp if isinstance(pp, int) and pp > 0 else 1),
        "loads": [_rank_load(state, rank, sections) for rank in ranks],
    }


def prometheus_text(data: dict[str, Any]) -> str:
    """`?format=prometheus`: each numeric field a gauge by dp_rank, sections prefixed
    (`sglang_spec_...`, `sglang_disagg_...`; v1_loads.py:62-92)."""
    prefixes = {"speculative": "spec", "disaggregation": "disagg"}
    samples: dict[str, list[tuple[int, float]]] = {}
    for load in data["loads"]:
        rank = load["dp_rank"]
        for key, value in load.items():
            if key == "dp_rank":
                continue
            if isinstance(value, dict):
                prefix = prefixes.get(key, key)
                for sub, sub_value in value.items():
                    if isinstance(sub_value, int | float):
                        samples.setdefault(f"sglang_{prefix}_{sub}", []).append((rank, sub_value))
            elif isinstance(value, int | float):
                samples.setdefault(f"sglang_{key}", []).append((rank, value))
    lines = []
    for name, values in samples.items():
        lines.append(f"# TYPE {name} gauge")
        lines += [f'{name}{{dp_rank="{rank}"}} {value}' for rank, value in values]
    return "\n".join(lines) + "\n"
