"""Startup phases of an SGLang server, read from its log lines."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

READY_LINE = "The server is fired up and ready to roll!"


class Phase(StrEnum):
    """Where a starting server is; ordered as SGLang goes through them."""

    STARTING = "starting"
    LOADING = "loading"
    WARMING = "warming"
    READY = "ready"


@dataclass(frozen=True)
class Milestone:
    phase: Phase
    label: str


# sglang 0.5.23: srt/distributed/bootstrap.py:115, srt/model_executor/model_runner.py:1274,1373,
# startup_weight_load.py:538, srt/mem_cache/kv_cache_configurator.py:499,
# srt/entrypoints/http_server.py:2600; uvicorn's own lines. Every pattern is searched, so the
# per-rank prefix (none at tp=1, " TP{n}", " DP{d} TP{t}") does not matter.
_MILESTONES: tuple[tuple[re.Pattern[str], Milestone], ...] = (
    (re.compile(r"Init parallel begin"), Milestone(Phase.STARTING, "init parallel")),
    (re.compile(r"Load weight begin"), Milestone(Phase.LOADING, "loading weights")),
    (re.compile(r"Load weight end\."), Milestone(Phase.LOADING, "weights loaded")),
    (re.compile(r"Memory pool end"), Milestone(Phase.LOADING, "KV cache allocated")),
    (
        re.compile(r"Uvicorn running on|Started server process|Application startup complete"),
        Milestone(Phase.WARMING, "HTTP up, warming up"),
    ),
    (re.compile(re.escape(READY_LINE)), Milestone(Phase.READY, "ready")),
)
# `Capture {role} {decode|verify|prefill} CUDA graph begin.` (sglang 0.5.23
# srt/model_executor/model_runner_components/cuda_graph_setup.py:683-696, 750-790), the draft's
# `Capture draft {decode|extend} CUDA graph begin.` (srt/speculative/eagle_worker_v2.py:515,634),
# `Capture Frozen-KV MTP draft cuda graph begin.` (frozen_kv_mtp_worker_v2.py:396) and
# `Capture UNO tree draft CUDA graph begin.` (uno_worker_v2.py:166); the same with `end.`.
_CUDA_GRAPH = re.compile(r"\bCapture ([\w-]+(?: [\w-]+)*?) (?:CUDA|cuda) graph (begin|end)\b")


def milestone(line: str) -> Milestone | None:
    graph = _CUDA_GRAPH.search(line)
    if graph is not None:
        what, edge = graph.groups()
        label = "capturing CUDA graph" if edge == "begin" else "CUDA graph captured"
        return Milestone(Phase.LOADING, f"{label}: {what}")
    for pattern, found in _MILESTONES:
        if pattern.search(line):
            return found
    return None


# `[%(asctime)s{prefix}] ` with datefmt "%Y-%m-%d %H:%M:%S" and, with SGLANG_LOG_MS, ".%03d"
# (sglang 0.5.23 srt/utils/common.py:2629-2636; uvicorn's at :3511-3515).
_TIMESTAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)[ \]]")


def log_timestamp(line: str) -> str | None:
    """The time a log record was written, as the log wrote it."""
    match = _TIMESTAMP.match(line)
    return match.group(1) if match else None


class LogFollower:
    """Reads new complete lines of a growing log file (bounded per call)."""

    def __init__(self, path: str, max_bytes_per_read: int = 1 << 20, *, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        self._partial = b""
        self.max_bytes = max_bytes_per_read

    def read_new_lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(0, 2)
                size = handle.tell()
                if size < self.offset:  # truncated or replaced
                    self.offset = 0
                    self._partial = b""
                handle.seek(self.offset)
                data = handle.read(self.max_bytes)
        except OSError:
            return []
        self.offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        return [line.decode(errors="replace").rstrip("\r") for line in lines]


def tail_lines(path: str, count: int, max_bytes: int = 256 * 1024) -> list[str]:
    """The last `count` lines of a file (a last line still being written included), reading
    at most `max_bytes` from its end."""
    return tail_and_end(path, count, max_bytes, partial=True)[0]


def tail_and_end(
    path: str, count: int, max_bytes: int = 256 * 1024, *, partial: bool = False
) -> tuple[list[str], int]:
    """The last `count` whole lines of a file and the offset they end at: a follower started
    there (`LogFollower(path, offset=...)`) misses no line and repeats none. `partial` adds
    a last line still being written (then the offset is the end of the file)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read(min(size, max_bytes))
    except OSError:
        return [], 0
    whole = len(data) if partial else data.rfind(b"\n") + 1  # after the last whole line
    end = max(0, size - max_bytes) + whole
    complete = data[:whole]
    lines = complete.decode(errors="replace").splitlines()
    if size > max_bytes and lines:
        lines = lines[1:]
    return (lines[-count:] if count > 0 else []), end
