"""Which CUDA graphs a scheduler captures at startup, and the lines SGLang 0.5.23 logs for each.

The target model captures prefill first, then decode, or verify for speculative decoding
(sglang 0.5.23 srt/model_executor/model_runner_components/cuda_graph_setup.py:421-437; texts
at :683-698 and :750-790); every rank logs them. An EAGLE-style draft with more than one step
then captures draft decode and draft extend graphs, logged on rank 0 only
(srt/speculative/eagle_worker_v2.py:510-536, 625-654); a DFLASH draft captures a draft
verify graph.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.sim.options import SimOptions

EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "NEXTN"})
"""NEXTN (the `mtp` variant) resolves to EAGLE (srt/arg_groups/speculative_hook.py:109-116)."""
DECODE_BACKEND = "full"
"""Decode default (srt/model_executor/cuda_graph_config.py:151-153)."""
PREFILL_BACKEND = "breakable"
"""Prefill default on CUDA (cuda_graph_config.py:116-120)."""
PREFILL_DISABLED = (
    "Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' "
    "(e.g. via --cuda-graph-backend-prefill=disabled or auto-disable rules)."
)
"""cuda_graph_setup.py:495-500."""


@dataclass(frozen=True)
class Capture:
    """One graph capture: `begin` and `end` are format strings with `{avail}` (GB free
    before), `{after}` (GB free after), `{elapsed}` (s) and `{usage}` (GB)."""

    name: str
    begin: str
    end: str
    rank0_only: bool
    seconds: float
    mem_gb: float


def decode_batch_sizes(max_bs: int, speculative: bool) -> list[int]:
    """srt/arg_groups/cuda_graph_hook.py:500-531."""
    if speculative:
        sizes = (
            list(range(1, 9))
            + list(range(10, 33, 2))
            + list(range(40, 65, 4))
            + list(range(72, 257, 8))
            + list(range(272, max_bs + 1, 16))
        )
    else:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16)]
        sizes += range(512, max_bs + 1, 32)
    sizes = [s for s in sizes if s <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def prefill_token_sizes(max_tokens: int) -> list[int]:
    """srt/arg_groups/cuda_graph_hook.py:480-497."""
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1024 + 1, 64))
        + list(range(1280, 4096 + 1, 256))
        + list(range(4608, max_tokens + 1, 512))
    )
    return [s for s in sizes if s <= max_tokens]


def _decode_disabled(options: SimOptions) -> bool:
    return bool(options.get("disable_cuda_graph")) or (
        options.get("cuda_graph_backend_decode") == "disabled"
    )


def prefill_backend(options: SimOptions) -> str:
    """`--cuda-graph-backend-prefill`, else the CUDA default; `disabled` when a flag turns the
    prefill graph off (srt/arg_groups/cuda_graph_hook.py:60-71)."""
    if options.get("disable_cuda_graph") or options.get("disable_prefill_cuda_graph"):
        return "disabled"
    return str(options.get("cuda_graph_backend_prefill") or PREFILL_BACKEND)


def prefill_conflicts(options: SimOptions) -> list[str]:
    """The startup warnings that turn a prefill graph off, in the order resolution checks
    them: KV-cache sharding (srt/arg_groups/kv_shard_hook.py:326-333), then the breakable
    backend's rules, of which the simulator knows two (cuda_graph_hook.py:213-221, 242-247)."""
    backend = prefill_backend(options)
    if backend == "disabled":
        return []
    if options.get("enable_kv_cache_sharding"):
        return [
            f"Prefill CUDA graph ({backend}) is incompatible with --enable-kv-cache-sharding; "
            "disabling it."
        ]
    if backend != "breakable":
        return []
    for name, on in (
        ("decode context parallel (dcp_size > 1)", int(options.get("dcp_size") or 1) > 1),
        ("two-batch overlap", bool(options.get("enable_two_batch_overlap"))),
    ):
        if on:
            return [
                f"Breakable CUDA graph is incompatible with {name}; disabling prefill CUDA graph."
            ]
    return []


def prefill_disabled(options: SimOptions) -> bool:
    return prefill_backend(options) == "disabled" or bool(prefill_conflicts(options))


def prefill_graph_tokens(options: SimOptions) -> int:
    """The largest prefill batch (tokens) a captured graph runs; 0 without a prefill graph."""
    if prefill_disabled(options):
        return 0
    sizes = prefill_token_sizes(int(options.get("cuda_graph_max_bs_prefill") or 8192))
    return max(sizes, default=0)


def plan_captures(
    options: SimOptions, *, max_running: int, draft_tokens: int, slow: float
) -> list[Capture]:
    """The captures a scheduler runs after its memory pool, in order."""
    algorithm = str(options.get("speculative_algorithm") or "").upper()
    captures: list[Capture] = []
    if not prefill_disabled(options):
        tokens = prefill_token_sizes(int(options.get("cuda_graph_max_bs_prefill") or 8192))
        captures.append(
            Capture(
                "target prefill",
                "Capture target prefill CUDA graph begin. "
                f"backend={prefill_backend(options)}, num_tokens={tokens}, "
                "avail mem={avail:.2f} GB",
                "Capture target prefill CUDA graph end. elapsed={elapsed:.2f} s, "
                "mem usage={usage:.2f} GB, avail mem={after:.2f} GB.",
                False,
                0.6 * slow,
                0.25,
            )
        )
    if _decode_disabled(options):
        return captures
    max_bs = int(options.get("cuda_graph_max_bs_decode") or max_running)
    name, per_req = ("target verify", draft_tokens) if algorithm else ("target decode", 1)
    if algorithm == "DDTREE" and options.get("speculative_ddtree_budget"):
        per_req = int(options.get("speculative_ddtree_budget")) + 1  # the tree and its root
    captures.append(
        Capture(
            name,
            f"Capture {name} CUDA graph begin. backend={DECODE_BACKEND}, "
            f"num_tokens_per_req={per_req}, avail mem={{avail:.2f}} GB",
            f"Capture {name} CUDA graph end. bs={decode_batch_sizes(max_bs, bool(algorithm))}, "
            "elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB, avail mem={after:.2f} GB.",
            False,
            1.2 * slow,
            0.6,
        )
    )
    if algorithm == "DFLASH":
        # The DFLASH draft runner is built with the target's algorithm, so its decode capture
        # is a "draft verify" one, on every rank (srt/speculative/dflash_worker_v2.py:424,
        # 698-750; cuda_graph_setup.py:750-757).
        captures.append(
            Capture(
                "draft verify",
                f"Capture draft verify CUDA graph begin. backend={DECODE_BACKEND}, "
                f"num_tokens_per_req={draft_tokens}, avail mem={{avail:.2f}} GB",
                "Capture draft verify CUDA graph end. "
                f"bs={decode_batch_sizes(max_bs, True)}, "
                "elapsed={elapsed:.2f} s, mem usage={usage:.2f} GB, avail mem={after:.2f} GB.",
                False,
                0.5 * slow,
                0.2,
            )
        )
    steps = int(options.get("speculative_num_steps") or 0)
    if algorithm in EAGLE_FAMILY and steps > 1:
        sizes = decode_batch_sizes(max_bs, True)
        topk = int(options.get("speculative_eagle_topk") or 1)
        for kind, per_req in (("decode", topk), ("extend", draft_tokens)):
            captures.append(
                Capture(
                    f"draft {kind}",
                    f"Capture draft {kind} CUDA graph begin. backend={DECODE_BACKEND}, "
                    f"num_tokens_per_req={per_req}, bs={sizes}, avail mem={{avail:.2f}} GB",
                    f"Capture draft {kind} CUDA graph end. elapsed={{elapsed:.2f}} s, "
                    "mem usage={usage:.2f} GB, avail mem={after:.2f} GB.",
                    True,
                    0.4 * slow,
                    0.15,
                )
            )
    return captures
