"""Why a server died: its exit status and the last lines of its log, as a short reason."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Failure:
    kind: str
    """cuda-oom, nccl, port-in-use, model-not-found, import-error, bad-flag, cuda-error,
    killed, exited, unknown."""
    reason: str
    """One line for `ps` and the TUI."""
    excerpt: tuple[str, ...] = field(default_factory=tuple)
    """The log lines that show it."""


_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("cuda-oom", re.compile(r"CUDA out of memory|OutOfMemoryError"), "CUDA out of memory"),
    (
        "nccl",
        re.compile(
            r"NCCL error|ncclUnhandled|ncclSystemError|NCCL timeout|"
            r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*timeout"
        ),
        "NCCL error",
    ),
    ("port-in-use", re.compile(r"address already in use|\[Errno 98\]"), "port already in use"),
    (
        "model-not-found",
        re.compile(
            r"couldn't connect to 'https://huggingface\.co'|LocalEntryNotFoundError|"
            r"RepositoryNotFoundError|Repo id must be in the form|does not appear to have a file "
            r"named config\.json|is not a local folder and is not a valid model identifier"
        ),
        "model not found or hub unreachable",
    ),
    (
        "bad-flag",
        re.compile(
            r"error: unrecognized arguments|error: argument --|"
            r"ambiguous option|invalid (?:int|float|choice) value"
        ),
        "unknown or invalid flag",
    ),
    (
        "import-error",
        re.compile(
            r"\b(?:ImportError|ModuleNotFoundError)\b|version mismatch|"
            r"is incompatible with"
        ),
        "Python import or version mismatch",
    ),
    (
        "cuda-error",
        re.compile(r"CUDA error:|illegal memory access|cudaErrorLaunchFailure"),
        "CUDA error",
    ),
)


def _detail(kind: str, line: str) -> str:
    """A short, specific suffix taken from the matching line."""
    text = line.strip()
    text = re.sub(r"^\[[^\]]*\]\s*", "", text)
    if kind == "cuda-oom":
        match = re.search(r"Tried to allocate ([\d.]+ [GMK]iB)", text)
        gpu = re.search(r"GPU (\d+) has a total capacity", text)
        parts = []
        if match:
            parts.append(f"tried to allocate {match.group(1)}")
        if gpu:
            parts.append(f"GPU {gpu.group(1)}")
        return ", ".join(parts)
    if kind == "port-in-use":
        match = re.search(r"address \(('?[\w.:]+'?), (\d+)\)", text)
        return f"{match.group(1).strip(chr(39))}:{match.group(2)}" if match else ""
    if kind == "bad-flag":
        match = re.search(r"error: (.*)$", text)
        return match.group(1) if match else text[:120]
    if kind in ("import-error", "cuda-error", "nccl", "model-not-found"):
        return text[:160]
    return ""


def classify(
    returncode: int | None, log_tail: list[str], *, stop_requested: bool
) -> Failure | None:
    """None when the process ended because we stopped it; otherwise what went wrong."""
    if stop_requested:
        return None
    for kind, pattern, label in _RULES:
        for index in range(len(log_tail) - 1, -1, -1):
            line = log_tail[index]
            if pattern.search(line):
                detail = _detail(kind, line)
                reason = f"{label}: {detail}" if detail else label
                excerpt = tuple(log_tail[max(0, index - 3) : index + 3])
                return Failure(kind, reason, excerpt)
    last = tuple(line for line in log_tail[-8:] if line.strip())
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return Failure("killed", f"killed by {name}", last)
    if returncode is not None:
        if returncode == 0:
            return Failure("exited", "exited on its own (status 0)", last)
        return Failure("exited", f"exited with status {returncode}", last)
    return Failure("unknown", "process gone; exit status unknown", last)


_ERROR_LINE = re.compile(
    r"Traceback \(most recent call last\)|\b(?:ERROR|CRITICAL|FATAL)\b|"
    r"\b\w+(?:Error|Exception)\b(?::|$)|\bKilled\b"
)


def is_error_line(line: str) -> bool:
    """A log line worth highlighting: a known failure pattern, a traceback, an error level."""
    return bool(_ERROR_LINE.search(line)) or any(p.search(line) for _, p, _ in _RULES)
