"""The flight recorder attached to a live monitor: what the screens showed, to a file.

It records every poll (GPU, host, server metrics, source states), the server list when a
server's state changes, discrete events, every run's row when the runs list changes, and
each ended run's summary once per file, again when it ends again (from callbacks: runs are
the bench layer's, which this layer does not import, so they arrive as the small protocols
below and become JSON only in the frame written). A summary that is not cached fresh is
built on a worker thread, never on the event loop the screens share. Files go to the state dir's
`recordings/`; the folder is kept under a size limit by deleting the oldest, and a session
that outgrows a quarter of it continues in a new file. The writer says how many bytes it is
about to append before it does (at each flush and at close), and older files are deleted
first, so the folder is never over the limit, not even between a write and the next poll.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from console.core.errors import ConsoleError
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


class RecordedRow(Protocol):
    """A run's row as the bench layer lists it (`console.bench.listing.RunRow`)."""

    @property
    def run_id(self) -> str: ...

    @property
    def status(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...  # the `runs` frame's JSON


class RecordedSummary(Protocol):
    """A run's summary (`console.bench.results.RunSummary`)."""

    def to_json(self) -> dict[str, Any]: ...  # the `run_summary` frame's JSON


RunsSource = Callable[[], Sequence[RecordedRow]]
"""Every run's row, oldest first."""
SummarySource = Callable[[str], RecordedSummary | None]
"""A run's summary, built if need be (may take a while; called on a worker thread); None
when the run is gone. Raises ConsoleError for a run that cannot be read."""
CachedSummarySource = Callable[[str], RecordedSummary | None]
"""A run's summary only when its cache is fresh (a stat and a read; called on the event
loop); None when it would have to be built."""


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
        runs: RunsSource | None = None,
        run_summary: SummarySource | None = None,
        cached_summary: CachedSummarySource | None = None,
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
        self.cached_summary = cached_summary
        self.note = note
        self.fixed_path = path
        self.path: Path | None = None
        self.writer: RecordingWriter | None = None
        self.error: str | None = None
        """Why recording stopped (disk full, unwritable folder); the session goes on."""
        self._servers: tuple[tuple[object, ...], ...] = ()
        self._runs: list[RecordedRow] = []
        self._runs_at = 0.0
        self._summaries_due: list[str] = []
        """Ended runs whose summaries this file still lacks, the next one last."""
        self._summarized: dict[str, RecordedSummary] = {}
        """The summary this file holds for each run (a run that ends again is re-recorded
        when its summary changed)."""
        self._building: str | None = None
        """The run whose summary the worker thread is building."""
        self._built: dict[str, RecordedSummary | str | None] = {}
        """What the worker built, for the next poll to record: a summary, why the run is
        unreadable, or None (gone)."""
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
        self._summaries_due, self._summarized = [], {}

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
            # Rotated here, before this poll's frames, not after the last one: a new file
            # always holds frames (a session that ends just after a rotation leaves no file
            # with a header alone).
            if self.fixed_path is None and self._rotate_if_due(writer) and self.writer:
                writer = self.writer
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
                rows = list(self.runs())
                if rows != self._runs:
                    self._note_ended(rows)
                    self._runs = rows
                    writer.runs(now, [row.to_json() for row in rows])
            self._record_one_summary(writer, now)
        except OSError as exc:
            self.error = f"recording stopped: {exc.strerror or exc}"
            self.close()

    def _note_ended(self, rows: list[RecordedRow]) -> None:
        """Queue the summaries of runs that ended since the last list (at a file's first
        list, the newest few ended runs). A run resumed and ended again is queued again."""
        ended = [r.run_id for r in rows if r.status in ENDED]
        if not self._runs:
            ended = ended[-SUMMARIES_AT_START:]
        else:
            before = {r.run_id: r.status for r in self._runs}
            ended = [run_id for run_id in ended if before.get(run_id) not in ENDED]
        due = [r for r in ended if r not in self._summaries_due]
        # Oldest first in the list, so the newest is recorded first (popped from the end).
        self._summaries_due = due + self._summaries_due

    def _record_one_summary(self, writer: RecordingWriter, now: float) -> None:
        """At most one summary per poll, and only one that is ready: cached fresh, or built
        by the worker thread since the last poll. A stale one is handed to the worker and
        recorded at a later poll; the event loop never builds one."""
        if self.run_summary is None or not self._summaries_due:
            return
        run_id = self._summaries_due[-1]
        if run_id in self._built:
            summary = self._built.pop(run_id)
        elif self._building == run_id:
            return
        else:
            summary = self._cached(run_id)
            if summary is None:
                if self._building is None:
                    self._build(run_id)
                # Others may be cached fresh meanwhile: this one waits at the back.
                self._summaries_due.insert(0, self._summaries_due.pop())
                return
        self._summaries_due.pop()
        if isinstance(summary, str):  # unreadable: the recording says why, and goes on
            writer.event(now, summary)
        elif summary is not None and self._summarized.get(run_id) != summary:
            self._summarized[run_id] = summary
            writer.run_summary(now, run_id, summary.to_json())

    def _cached(self, run_id: str) -> RecordedSummary | None:
        if self.cached_summary is None:
            return None
        try:
            return self.cached_summary(run_id)
        except (ConsoleError, OSError, ValueError):
            return None  # built (or found unreadable) by the worker instead

    def _build(self, run_id: str) -> None:
        """Build one run's summary on a worker thread; the result waits in `_built`."""
        source = self.run_summary
        assert source is not None
        self._building = run_id

        def build() -> None:
            summary: RecordedSummary | str | None
            try:
                summary = source(run_id)
            except ConsoleError as exc:
                summary = exc.message  # one unreadable run is said; the recording goes on
            except Exception as exc:  # a worker thread's traceback would garble the TUI
                summary = f"run {run_id} is unreadable: {type(exc).__name__}: {exc}"
            self._built[run_id] = summary
            self._building = None

        threading.Thread(target=build, name=f"summary-{run_id}", daemon=True).start()

    def _rotate_if_due(self, writer: RecordingWriter) -> bool:
        """Continue in a new file before the next flush would take this one past a quarter
        of the limit (the limit itself is kept by `_reserve`, at every write); True when it
        did."""
        if writer.size_bytes + writer.flush_growth > self.max_bytes // 4:
            writer.close()
            self._open()
            return True
        return False

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
