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


_MILESTONES: tuple[tuple[re.Pattern[str], Milestone], ...] = (
    (re.compile(r"Init parallel begin"), Milestone(Phase.STARTING, "init parallel")),
    (re.compile(r"Load weight begin"), Milestone(Phase.LOADING, "loading weights")),
    (
        re.compile(r"Load weight end\. elapsed=([\d.]+) s"),
        Milestone(Phase.LOADING, "weights loaded"),
    ),
    (re.compile(r"Memory pool end"), Milestone(Phase.LOADING, "KV cache allocated")),
    (
        re.compile(r"Capture (?:decode |prefill )?[Cc][Uu][Dd][Aa] graph begin"),
        Milestone(Phase.LOADING, "capturing CUDA graphs"),
    ),
    (
        re.compile(r"Capture (?:decode |prefill )?[Cc][Uu][Dd][Aa] graph end"),
        Milestone(Phase.LOADING, "CUDA graphs captured"),
    ),
    (
        re.compile(r"Uvicorn running on|Started server process|Application startup complete"),
        Milestone(Phase.WARMING, "HTTP up, warming up"),
    ),
    (re.compile(re.escape(READY_LINE)), Milestone(Phase.READY, "ready")),
)


def milestone(line: str) -> Milestone | None:
    for pattern, found in _MILESTONES:
        if pattern.search(line):
            return found
    return None


class LogFollower:
    """Reads new complete lines of a growing log file (bounded per call)."""

    def __init__(self, path: str, max_bytes_per_read: int = 1 << 20) -> None:
        self.path = path
        self.offset = 0
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
    """The last `count` lines of a file, reading at most `max_bytes` from its end."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return []
    lines = data.decode(errors="replace").splitlines()
    if size > max_bytes and lines:
        lines = lines[1:]
    return lines[-count:] if count > 0 else []
