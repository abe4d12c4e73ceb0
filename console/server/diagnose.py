"""Diagnose an SGLang log: the startup phases it reached, when, and what failure ended it.

One code path for every reader: `ddconsole diagnose` (any log, also one ddconsole did not
write), a managed server's status (`up`, `ps`, the TUI) and the Logs screen. A log is streamed
line by line with bounded memory: the first line of each phase, and the last lines for the
failure search (SGLang's failure and its aftermath sit at the end of a log).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from console.core.errors import UsageError
from console.core.redact import redact_text
from console.server.classify import Failure, classify, find_failure
from console.server.milestones import log_timestamp, milestone, tail_lines

TAIL_LINES = 2000
"""Lines kept for the failure search: a tp8 cascade of tracebacks fits."""
TAIL_BYTES = 1 << 20
"""At most this much of a log's end is read for a server's status."""
MAX_LINE_BYTES = 16 * 1024
"""A longer line is cut (a file without newlines must not fill memory)."""
MAX_PHASES = 64
_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class PhaseReached:
    label: str
    phase: str
    """starting, loading, warming, ready."""
    timestamp: str | None
    """From the log's own `[YYYY-mm-dd HH:MM:SS...]` prefix; None on a line without one."""
    line_number: int


@dataclass(frozen=True)
class Diagnosis:
    source: str
    line_count: int
    phases: tuple[PhaseReached, ...]
    failure: Failure | None
    failure_line_number: int | None
    """1-based, in the whole log."""

    @property
    def reached(self) -> PhaseReached | None:
        return self.phases[-1] if self.phases else None

    def to_json(self) -> dict[str, Any]:
        failure = self.failure
        return {
            "log": self.source,
            "lines": self.line_count,
            "phases": [
                {
                    "label": p.label,
                    "phase": p.phase,
                    "timestamp": p.timestamp,
                    "line_number": p.line_number,
                }
                for p in self.phases
            ],
            "reached": self.reached.label if self.reached else None,
            "failure": None
            if failure is None
            else {
                "kind": failure.kind,
                "reason": failure.reason,
                "line": failure.line,
                "line_number": self.failure_line_number,
                "excerpt": list(failure.excerpt),
            },
        }

    def phase_lines(self) -> list[str]:
        """`  10:00:05  loading weights  (line 3)` per phase reached."""
        return [
            f"  {p.timestamp or '-':<19}  {p.label}  (line {p.line_number})" for p in self.phases
        ]

    def summary(self) -> str:
        """One line: the failure, or how far the server got."""
        reached = self.reached.label if self.reached else "no startup phase"
        if self.failure is None:
            return f"no failure found; reached: {reached}"
        where = f" (line {self.failure_line_number})" if self.failure_line_number else ""
        return f"{self.failure.kind}: {self.failure.reason}{where}; reached: {reached}"


def diagnose_lines(
    lines: Iterable[str],
    *,
    source: str = "",
    returncode: int | None = None,
    stop_requested: bool = False,
) -> Diagnosis:
    """Diagnose log lines as they stream past. Without an exit status only what the log shows
    is a failure; with one, an unexplained exit is too (as a server's status reads it)."""
    tail: deque[tuple[int, str]] = deque(maxlen=TAIL_LINES)
    phases: list[PhaseReached] = []
    seen: set[str] = set()
    count = 0
    for count, line in enumerate(lines, 1):
        tail.append((count, line))
        found = milestone(line)
        if found is not None and found.label not in seen and len(seen) < MAX_PHASES:
            seen.add(found.label)
            phases.append(PhaseReached(found.label, found.phase.value, log_timestamp(line), count))
    window = [line for _, line in tail]
    if returncode is None and not stop_requested:
        failure = find_failure(window)
    else:
        failure = classify(returncode, window, stop_requested=stop_requested)
    number = tail[failure.index][0] if failure is not None and failure.index is not None else None
    return Diagnosis(source, count, tuple(phases), redact_failure(failure), number)


def redact_failure(failure: Failure | None) -> Failure | None:
    """The failure with secrets masked in its reason, line and excerpt: SGLang logs its API
    keys in clear (`server_args={...}`, sglang 0.5.23 srt/entrypoints/engine.py:1185), and
    a log handed to diagnose may be anyone's."""
    if failure is None:
        return None
    return dataclasses.replace(
        failure,
        reason=redact_text(failure.reason),
        line=None if failure.line is None else redact_text(failure.line),
        excerpt=tuple(redact_text(line) for line in failure.excerpt),
    )


def _read_lines(handle: Any) -> Iterator[str]:
    """Lines of a binary file handle, each cut at MAX_LINE_BYTES (the rest of it skipped)."""
    continuing = False
    while True:
        chunk: bytes = handle.readline(MAX_LINE_BYTES)
        if not chunk:
            return
        complete = chunk.endswith(b"\n")
        if not continuing:
            yield chunk.decode(errors="replace").rstrip("\r\n")
        continuing = not complete


def open_log(path: str) -> Any:
    """The log opened for reading, or a UsageError that names the file and what is wrong."""
    if os.path.isdir(path):
        raise UsageError(f"{path} is a directory, not a log file")
    try:
        handle = open(path, "rb")  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except PermissionError:
        raise UsageError(f"{path}: permission denied (cannot read it)") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        head = handle.read(_SNIFF_BYTES)
    except OSError as exc:
        handle.close()
        raise UsageError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if b"\x00" in head:
        handle.close()
        raise UsageError(f"{path} is not a text log (it holds binary data)")
    handle.seek(0)
    return handle


def diagnose_file(
    path: str, *, returncode: int | None = None, stop_requested: bool = False
) -> Diagnosis:
    """Diagnose a log file of any size (streamed; memory bounded by TAIL_LINES)."""
    with open_log(path) as handle:
        try:
            return diagnose_lines(
                _read_lines(handle),
                source=path,
                returncode=returncode,
                stop_requested=stop_requested,
            )
        except OSError as exc:
            raise UsageError(f"{path}: cannot read it ({exc.strerror or exc})") from None


_FailureKey = tuple[str, int, int, int | None, bool]
# Shared by the poller's executor threads and the UI: guarded, and bounded (oldest out first).
_failures: OrderedDict[_FailureKey, Failure | None] = OrderedDict()
_failures_lock = threading.Lock()
_FAILURES_KEPT = 64


def log_failure(path: str, returncode: int | None, *, stop_requested: bool) -> Failure | None:
    """Why a managed server ended, from its log's last lines and its exit status: the same
    classification `diagnose` gives, on the same window. An ended server's log no longer
    changes and `ps` and the TUI ask again on every refresh, so the answer is kept per version
    of the file."""
    try:
        info = os.stat(path)
        key: _FailureKey | None = (
            path,
            info.st_size,
            info.st_mtime_ns,
            returncode,
            stop_requested,
        )
    except OSError:
        key = None
    if key is not None:
        with _failures_lock:
            if key in _failures:
                _failures.move_to_end(key)
                return _failures[key]
    lines = tail_lines(path, TAIL_LINES, TAIL_BYTES)
    failure = redact_failure(classify(returncode, lines, stop_requested=stop_requested))
    if key is not None:
        with _failures_lock:
            _failures[key] = failure
            while len(_failures) > _FAILURES_KEPT:
                _failures.popitem(last=False)
    return failure
