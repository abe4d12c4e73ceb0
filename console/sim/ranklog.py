"""The simulator's log format: SGLang's, with each scheduler rank's own prefix.

SGLang logs `[%(asctime)s{prefix}] %(message)s` (sglang 0.5.23 srt/utils/common.py:2618-2631).
The leader and detokenizer have no prefix; a scheduler's is built from its ranks
(srt/managers/scheduler.py:6279-6291), and its process title is the same prefix with `_` for
spaces (:6294). The simulator's schedulers are placeholder processes, so the leader writes their
lines for them, once per rank, with that rank's prefix.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass

LOG_FORMAT = "[%(asctime)s%(prefix)s] %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True, slots=True)
class Widths:
    """The parallel widths besides TP and DP that show in a scheduler's prefix (ServerArgs
    pp_size, ep_size, attn_cp_size, moe_dp_size); attention DP is not modelled."""

    pp: int = 1
    ep: int = 1
    attn_cp: int = 1
    moe_dp: int = 1


def rank_prefix(
    dp_rank: int | None,
    tp_size: int,
    tp_rank: int,
    *,
    pp_rank: int = 0,
    widths: Widths | None = None,
) -> str:
    """A scheduler's prefix, in SGLang's order: ` DP{d}` (a DP rank was passed), ` PP{p}`,
    ` ATTN_CP{c}`, ` MOE_DP{m}`, ` TP{t}`, ` EP{e}`, each only when its width is > 1
    (sglang 0.5.23 srt/managers/scheduler.py:6279-6291). The CP, MoE-DP and EP ranks derive
    from the TP rank as srt/runtime_context.py:106-134 does; attention DP is off, so the
    attention TP width is tp / attn_cp (:73-76)."""
    w = widths or Widths()
    tp = max(1, tp_size)
    attn_cp = max(1, w.attn_cp)
    moe_dp = max(1, w.moe_dp)
    ep = max(1, w.ep)
    attn_tp = max(1, tp // attn_cp)
    moe_span = max(1, tp // moe_dp)
    prefix = ""
    if dp_rank is not None:
        prefix += f" DP{dp_rank}"
    if w.pp > 1:
        prefix += f" PP{pp_rank}"
    if attn_cp > 1:
        prefix += f" ATTN_CP{(tp_rank // attn_tp) % attn_cp}"
    if moe_dp > 1:
        # MoE-DP aliases the attention-CP group when CP is wider (srt/runtime_context.py:1584).
        attn_cp_rank = (tp_rank // attn_tp) % attn_cp
        prefix += f" MOE_DP{attn_cp_rank if moe_dp < attn_cp else tp_rank // moe_span}"
    if tp > 1:
        prefix += f" TP{tp_rank}"
    if ep > 1:
        prefix += f" EP{tp_rank % moe_span // max(1, moe_span // ep)}"
    return prefix


def rank_prefixes(tp: int, dp: int, widths: Widths | None = None) -> list[str]:
    """Every scheduler's prefix in launch order (DP rank, then PP rank, then TP rank); the DP
    rank is None at dp=1 (the engine starts the schedulers itself,
    srt/entrypoints/engine.py:931-952)."""
    w = widths or Widths()
    return [
        rank_prefix(d if dp > 1 else None, tp, t, pp_rank=p, widths=w)
        for d in range(max(1, dp))
        for p in range(max(1, w.pp))
        for t in range(tp)
    ]


def stats_logging_prefixes(tp: int, dp: int, widths: Widths | None = None) -> list[list[str]]:
    """Per DP rank, the prefixes of its schedulers that log "Prefill batch" / "Decode batch":
    attention TP rank 0 and attention CP rank 0 (sglang 0.5.23
    srt/observability/metrics_collector.py:1361-1363, metrics_reporter.py:803, 1067), which
    without attention DP is TP rank 0 of every pipeline stage."""
    w = widths or Widths()
    return [
        [
            rank_prefix(d if dp > 1 else None, tp, 0, pp_rank=p, widths=w)
            for p in range(max(1, w.pp))
        ]
        for d in range(max(1, dp))
    ]


class _DefaultPrefix(logging.Filter):
    """Lines without a prefix are the leader's (none), except those marked
    `extra={"scheduler": True}`, which get the first scheduler's."""

    def __init__(self, scheduler_prefix: str) -> None:
        super().__init__()
        self.scheduler_prefix = scheduler_prefix

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "prefix"):
            record.prefix = self.scheduler_prefix if getattr(record, "scheduler", False) else ""
        return True


def configure_logging(tp: int = 1, dp: int = 1, widths: Widths | None = None) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt=DATE_FORMAT))
    handler.addFilter(_DefaultPrefix(rank_prefixes(tp, dp, widths)[0]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


class RankLog:
    """Writes scheduler lines as each rank would."""

    def __init__(self, logger: logging.Logger, prefixes: Sequence[str]) -> None:
        self.logger = logger
        self.prefixes = list(prefixes) or [""]

    def each(self, level: int, message: str) -> None:
        """A line every rank logs (logger.info in the scheduler)."""
        for prefix in self.prefixes:
            self.logger.log(level, message, extra={"prefix": prefix})

    def first(self, level: int, message: str) -> None:
        """A line rank 0 logs (log_info_on_rank0, or the first rank to fail)."""
        self.logger.log(level, message, extra={"prefix": self.prefixes[0]})


class AccessPathFilter(logging.Filter):
    """Drops uvicorn access lines for some path prefixes, as SGLang's UvicornAccessLogFilter
    (sglang 0.5.23 srt/utils/common.py:3452-3506) does with the request line's path."""

    def __init__(self, excluded_path_prefixes: Sequence[str] = ()) -> None:
        super().__init__()
        self.excluded = tuple(str(p) for p in excluded_path_prefixes if p)

    def filter(self, record: logging.LogRecord) -> bool:
        # uvicorn's access record: (client_addr, method, full_path, http_version, status_code).
        args = record.args
        path = str(args[2]) if isinstance(args, tuple) and len(args) >= 3 else ""
        path = path.split("?", 1)[0]
        return not any(path.startswith(prefix) for prefix in self.excluded)
