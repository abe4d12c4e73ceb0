"""The flight recorder attached to a live monitor: what the screens showed, to a file.

It records every poll (GPU, host, server metrics, source states), the server list when a
server's state changes, discrete events, every run's row when the runs list changes, and
each ended run's summary once per file (from callbacks: runs are the bench layer's, which
this layer does not import, so they arrive as their JSON). Files go to the state dir's
`recordings/`; the folder is kept under a size limit by deleting the oldest, and a session
that outgrows a quarter of it continues in a new file. The writer says how many bytes it is
about to append before it does (at each flush and at close), and older files are deleted
first, so the folder is never over the limit, not even between a write and the next poll.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from console.core.redact import secret_values
from console.server.external import listing_json
from console.server.monitor import Monitor
from console.server.status import ServerStatus
from console.telemetry.recording import SUFFIX, RecordingWriter, header, prune
from console.telemetry.source import PollResult
from console.topology.model import Topology

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
RUNS_EVERY_S = 5.0
"""How often the runs are listed into the recording (a replay's runs list moves in these
steps; a results folder of hundreds of runs is listed each time, ended ones from a cache)."""
SUMMARIES_AT_START = 16
"""Ended runs whose summaries a new file records at once, newest first (the runs a replay
is most likely to open); runs that end while it records are added as they end."""
ENDED = ("done", "failed", "interrupted")

RunsJson = Callable[[], list[dict[str, Any]]]
"""Every run's row as JSON, oldest first."""
SummaryJson = Callable[[str], dict[str, Any] | None]
"""A run's summary as JSON, or None when it cannot be read."""


def server_json(status: ServerStatus) -> dict[str, Any]:
    data = status.to_json()
    data["plan"] = status.record.plan.to_json()
    return data


def _signature(servers: list[ServerStatus]) -> tuple[tuple[object, ...], ...]:
    return tuple((s.id, s.state.value, s.reason, s.phase_label, s.pid) for s in servers)


class SessionRecorder:
    def __init__(
        self,
        monitor: Monitor,
        folder: Path,
        *,
        demo: bool,
        topology: Topology,
        max_bytes: int = DEFAULT_MAX_BYTES,
        runs: RunsJson | None = None,
        run_summary: SummaryJson | None = None,
        path: Path | None = None,
        note: str = "",
    ) -> None:
        self.monitor = monitor
        self.folder = folder
        self.demo = demo
        self.topology = topology
        self.max_bytes = max_bytes
        self.runs = runs
        self.run_summary = run_summary
        self.note = note
        self.fixed_path = path
        self.path: Path | None = None
        self.writer: RecordingWriter | None = None
        self.error: str | None = None
        """Why recording stopped (disk full, unwritable folder); the session goes on."""
        self._servers: tuple[tuple[object, ...], ...] = ()
        self._runs: list[dict[str, Any]] = []
        self._runs_at = 0.0
        self._summaries_due: list[str] = []
        """Ended runs whose summaries this file still lacks, the next one last."""
        self._summarized: set[str] = set()
        self.files: list[Path] = []
        # Flushes come from the event loop and from worker threads (events).
        self._prune_lock = threading.Lock()

    def _secrets(self) -> set[str]:
        names = {
            s.record.plan.api_key_env
            for s in (self.monitor.watcher.current if self.monitor.watcher else [])
            if s.record.plan.api_key_env
        }
        return secret_values(os.environ, names)

    def _open(self) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = self.fixed_path or self.folder / f"session-{stamp}-{os.getpid()}{SUFFIX}"
        if self.writer is not None and path == self.path:
            path = self.folder / f"session-{stamp}-{os.getpid()}-{len(self.files)}{SUFFIX}"
        head = header(
            demo=self.demo,
            topology=self.topology.to_json(),
            interval_s=self.monitor.interval_s,
            t0_mono=time.monotonic(),
            note=self.note,
        )
        reserve = None if self.fixed_path is not None else partial(self._reserve, path)
        self.writer = RecordingWriter(path, head, self._secrets(), reserve=reserve)
        self.path = path
        self.files.append(path)
        self._servers = ()
        # Each file stands alone: it lists the runs and records their summaries again.
        self._runs, self._runs_at = [], 0.0
        self._summaries_due, self._summarized = [], set()

    def _reserve(self, path: Path, size: int) -> None:
        """Room for `size` more bytes in `path`: delete the oldest other files until the
        folder, `path` included, will hold at most the limit once they are written (a
        limit smaller than the current file alone cannot be kept)."""
        with self._prune_lock:
            prune(self.folder, self.max_bytes - size, keep=path)

    def start(self) -> None:
        try:
            self._open()
        except OSError as exc:
            self.error = f"not recording: {exc.strerror or exc}"
            return
        self.monitor.poller.listeners.append(self._on_poll)

    def _on_poll(self, now: float, result: PollResult) -> None:
        writer = self.writer
        if writer is None:
            return
        try:
            servers = self.monitor.watcher.current if self.monitor.watcher else []
            external = self.monitor.watcher.external if self.monitor.watcher else []
            signature = _signature(servers) + tuple(
                (e.id, e.state, e.reason, None, e.pid) for e in external
            )
            if signature != self._servers:
                self._servers = signature
                writer.secrets |= self._secrets()
                writer.servers(
                    now, [server_json(s) for s in servers] + [listing_json(e) for e in external]
                )
            writer.poll(now, result)
            if self.runs is not None and now - self._runs_at >= RUNS_EVERY_S:
                self._runs_at = now
                rows = self.runs()
                if rows != self._runs:
                    self._note_ended(rows)
                    self._runs = rows
                    writer.runs(now, rows)
            self._record_one_summary(writer, now)
            if self.fixed_path is None:
                self._rotate_if_due(writer)
        except OSError as exc:
            self.error = f"recording stopped: {exc.strerror or exc}"
            self.close()

    def _note_ended(self, rows: list[dict[str, Any]]) -> None:
        """Queue the summaries of runs that ended since the last list (at a file's first
        list, the newest few ended runs)."""
        ended = [str(r.get("run_id")) for r in rows if r.get("status") in ENDED]
        if not self._runs:
            ended = ended[-SUMMARIES_AT_START:]
        else:
            before = {str(r.get("run_id")): r.get("status") for r in self._runs}
            ended = [run_id for run_id in ended if before.get(run_id) not in ENDED]
        due = [r for r in ended if r not in self._summarized and r not in self._summaries_due]
        # Oldest first in the list, so the newest is recorded first (popped from the end).
        self._summaries_due = due + self._summaries_due

    def _record_one_summary(self, writer: RecordingWriter, now: float) -> None:
        """One summary per poll at most: reading one may mean rebuilding it from its files,
        and polls run on the event loop the screens share."""
        if self.run_summary is None or not self._summaries_due:
            return
        run_id = self._summaries_due.pop()
        self._summarized.add(run_id)
        summary = self.run_summary(run_id)
        if summary is not None:
            writer.run_summary(now, run_id, summary)

    def _rotate_if_due(self, writer: RecordingWriter) -> None:
        """Continue in a new file before the next flush would take this one past a quarter
        of the limit (the limit itself is kept by `_reserve`, at every write)."""
        if writer.size_bytes + writer.flush_growth > self.max_bytes // 4:
            writer.close()
            self._open()

    def event(self, text: str) -> None:
        if self.writer is not None:
            try:
                self.writer.event(time.monotonic(), text)
            except OSError as exc:
                self.error = f"recording stopped: {exc.strerror or exc}"
                self.close()

    def close(self) -> None:
        if self._on_poll in self.monitor.poller.listeners:
            self.monitor.poller.listeners.remove(self._on_poll)
        if self.writer is not None:
            try:
                self.writer.close()
            except OSError:
                pass
            self.writer = None
