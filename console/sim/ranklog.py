"""The simulator's log format: SGLang's, with each scheduler rank's own prefix.

SGLang logs `[%(asctime)s{prefix}] %(message)s` (sglang 0.5.23 srt/utils/common.py:2618-2631).
The leader and detokenizer have no prefix; a scheduler's is built from its ranks
(srt/managers/scheduler.py:6279-6291): ` DP{d}` when it has a DP rank (dp > 1), ` TP{t}` when
tp > 1. The simulator's schedulers are placeholder processes, so the leader writes their lines
for them, once per rank, with that rank's prefix.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

LOG_FORMAT = "[%(asctime)s%(prefix)s] %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


def rank_prefix(dp_rank: int | None, tp_size: int, tp_rank: int) -> str:
    """'' at tp=1 dp=1, ' TP{t}', ' DP{d}' (dp > 1, tp=1) or ' DP{d} TP{t}'."""
    prefix = ""
    if dp_rank is not None:
        prefix += f" DP{dp_rank}"
    if tp_size > 1:
        prefix += f" TP{tp_rank}"
    return prefix


def rank_prefixes(tp: int, dp: int) -> list[str]:
    """Every scheduler's prefix in launch order (DP rank major); the DP rank is None at dp=1
    (the engine starts the schedulers itself, srt/entrypoints/engine.py:944-952)."""
    return [rank_prefix(d if dp > 1 else None, tp, t) for d in range(max(1, dp)) for t in range(tp)]


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


def configure_logging(tp: int = 1, dp: int = 1) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt=DATE_FORMAT))
    handler.addFilter(_DefaultPrefix(rank_prefixes(tp, dp)[0]))
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
