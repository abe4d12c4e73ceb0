"""The runs under a results folder, cheaply: metadata and progress, no request files read.

`runs list` and the TUI's Runs and Bench screens refresh from this while campaigns write;
a run's summary comes from its cache of record (`summary.load_summary`) only for the run
being looked at. `DiskRuns` serves both to a front end (the live TUI backend, snapshots).
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass
from pathlib import Path

from console.bench.results import JsonDict, RunSummary
from console.bench.rundir import RunDir
from console.core.errors import ConsoleError


def _number(data: dict[str, object], name: str) -> float | None:
    """A finite number, else None: another host's JSON may say `Infinity`, `NaN` or
    `1e999`, which no duration or rate can be formatted from."""
    value = data.get(name)
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _count(data: dict[str, object], name: str) -> int | None:
    value = data.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True, kw_only=True)
class LevelProgress:
    """The level a live run is in, as its runner last wrote it (about once a second):
    level `index` (0-based) of `of` in the cell, requests `completed` (errors included) of
    `total` (None for a timed level), `errors`, the output tok/s so far (server clock, as
    the level's summary counts it), seconds since the level's first request and the
    estimated seconds left (real time; None until it can be estimated)."""

    index: int
    of: int
    concurrency: int | None
    rate: float | None
    completed: int
    total: int | None
    errors: int
    output_tok_s: float | None
    elapsed_s: float
    eta_s: float | None

    def position(self, of: str = " of ") -> str:
        """`2 of 3` (`2/3` with `of="/"`); `2, searching` in a saturation search, whose
        level count is not known ahead (`of` is 0)."""
        return f"{self.index + 1}{of}{self.of}" if self.of else f"{self.index + 1}, searching"

    @property
    def label(self) -> str:
        """`concurrency 4` or `rate 2/s`, as the level's own lines say it."""
        if self.rate is not None:
            return f"rate {self.rate:g}/s"
        return f"concurrency {self.concurrency if self.concurrency is not None else 1}"

    def to_json(self) -> dict[str, int | float | None]:
        return {
            "index": self.index,
            "of": self.of,
            "concurrency": self.concurrency,
            "rate": self.rate,
            "completed": self.completed,
            "total": self.total,
            "errors": self.errors,
            "output_tok_s": self.output_tok_s,
            "elapsed_s": self.elapsed_s,
            "eta_s": self.eta_s,
        }

    @classmethod
    def from_json(cls, data: object) -> LevelProgress | None:
        """None for anything that is not a level's progress (an older runner wrote none)."""
        if not isinstance(data, dict):
            return None
        index, of = _count(data, "index"), _count(data, "of")
        if index is None or of is None:
            return None
        return cls(
            index=index,
            of=of,
            concurrency=_count(data, "concurrency"),
            rate=_number(data, "rate"),
            completed=_count(data, "completed") or 0,
            total=_count(data, "total"),
            errors=_count(data, "errors") or 0,
            output_tok_s=_number(data, "output_tok_s"),
            elapsed_s=_number(data, "elapsed_s") or 0.0,
            eta_s=_number(data, "eta_s"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """Where a live campaign is: its cell, its level, requests done of those planned, and
    when it last said so (`progress.json`, as the campaign writes it). `server` is the
    managed server's id (or the URL) the level runs against; the latency figures are the
    client's own, exact, over the level's requests finished so far (on the server's clock,
    as the level's summary will show them)."""

    cell: str | None
    level: int | None
    done: int
    planned: int
    updated_wall: float | None = None
    server: str | None = None
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    itl_p50_s: float | None = None
    itl_p99_s: float | None = None
    live: LevelProgress | None = None
    """The level's running figures (`level_progress` in the file)."""
    phase: str | None = None
    """What the run does between levels: `launching ID: loading weights` while a cell's
    server starts (None while a level runs)."""
    run_eta_s: float | None = None
    """Real seconds left for the whole run, at its pace so far (server launches included);
    None until a request has finished."""
    correct_drafts_histogram: tuple[int, ...] | None = None
    """The level's finished requests' `spec_correct_drafts_histogram`s summed so far: verify
    steps by drafts accepted (None when no request carried one)."""

    def to_json(self) -> dict[str, object]:
        return {
            "cell": self.cell,
            "level": self.level,
            "done": self.done,
            "planned": self.planned,
            "updated_wall": self.updated_wall,
            "server": self.server,
            "ttft_p50_s": self.ttft_p50_s,
            "ttft_p99_s": self.ttft_p99_s,
            "itl_p50_s": self.itl_p50_s,
            "itl_p99_s": self.itl_p99_s,
            "level_progress": None if self.live is None else self.live.to_json(),
            "phase": self.phase,
            "run_eta_s": self.run_eta_s,
            "correct_drafts_histogram": (
                None
                if self.correct_drafts_histogram is None
                else list(self.correct_drafts_histogram)
            ),
        }

    @classmethod
    def from_json(cls, data: object) -> Progress | None:
        if not isinstance(data, dict):
            return None
        level, done, planned = data.get("level"), data.get("done"), data.get("planned")
        cell, server = data.get("cell"), data.get("server")

        def number(name: str) -> float | None:
            return _number(data, name)

        return cls(
            cell=None if cell is None else str(cell),
            level=level if isinstance(level, int) else None,
            done=done if isinstance(done, int) else 0,
            planned=planned if isinstance(planned, int) else 0,
            updated_wall=number("updated_wall"),
            server=None if server is None else str(server),
            ttft_p50_s=number("ttft_p50_s"),
            ttft_p99_s=number("ttft_p99_s"),
            itl_p50_s=number("itl_p50_s"),
            itl_p99_s=number("itl_p99_s"),
            live=LevelProgress.from_json(data.get("level_progress")),
            phase=None if data.get("phase") is None else str(data.get("phase"))[:200],
            run_eta_s=number("run_eta_s"),
            correct_drafts_histogram=_histogram(data.get("correct_drafts_histogram")),
        )


MAX_HISTOGRAM = 1024
"""Draft counts a progress file's histogram may list (a tree's budget is far below)."""


def _histogram(value: object) -> tuple[int, ...] | None:
    """A list of non-negative step counts, else None (a damaged or older file)."""
    if not isinstance(value, list) or not value or len(value) > MAX_HISTOGRAM:
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value):
        return None
    return tuple(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRow:
    run_id: str
    path: Path
    name: str | None
    kind: str | None
    status: str
    cells_done: int
    cells: int
    created_wall: float | None
    progress: Progress | None
    """The running level of a live campaign."""
    error: str | None = None

    @property
    def level(self) -> LevelProgress | None:
        """The running level's progress (completed/total, errors, tok/s, ETA), or None."""
        return None if self.progress is None else self.progress.live

    def to_json(self) -> JsonDict:
        return {
            "run_id": self.run_id,
            "run_dir": str(self.path),
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "cells_done": self.cells_done,
            "cells": self.cells,
            "created_wall": self.created_wall,
            "progress": None if self.progress is None else self.progress.to_json(),
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> RunRow:
        """A row as `to_json` wrote it (a recording's `runs` frame); tolerant of gaps."""

        def text(name: str) -> str | None:
            value = data.get(name)
            return None if value is None else str(value)

        def count(name: str) -> int:
            value = data.get(name)
            return value if isinstance(value, int) else 0

        run_id = str(data.get("run_id") or "?")
        return cls(
            run_id=run_id,
            path=Path(str(data.get("run_dir") or run_id)),
            name=text("name"),
            kind=text("kind"),
            status=str(data.get("status") or "unknown"),
            cells_done=count("cells_done"),
            cells=count("cells"),
            created_wall=_number(data, "created_wall"),
            progress=Progress.from_json(data.get("progress")),
            error=text("error"),
        )


def run_row(path: Path) -> RunRow:
    run = RunDir(path)
    try:
        meta = run.meta()
    except ConsoleError as exc:
        return RunRow(
            run_id=path.name,
            path=path,
            name=None,
            kind=None,
            status="unreadable",
            cells_done=0,
            cells=0,
            created_wall=None,
            progress=None,
            error=exc.message,
        )
    status = meta.status
    progress = None
    if status == "running":
        if run.owner_alive() is None:
            status = "interrupted"
        else:
            progress = _progress(path)
    return RunRow(
        run_id=path.name,
        path=path,
        name=meta.name,
        kind=meta.kind,
        status=status,
        cells_done=sum(1 for c in meta.cells if c.status == "done"),
        cells=len(meta.cells),
        created_wall=meta.created_wall,
        progress=progress,
    )


def _progress(path: Path) -> Progress | None:
    try:
        data = json.loads((path / "progress.json").read_text())
    except (OSError, ValueError):
        return None
    return Progress.from_json(data)


# Rows of ended runs by folder, kept while their run.json is unchanged: the flight recorder
# asks for the running runs every few seconds, and a results folder can hold hundreds.
_ENDED_ROWS: dict[Path, tuple[tuple[int, int], RunRow]] = {}
ENDED_STATUSES = ("done", "failed", "interrupted")
_ENDED_LOCK = threading.Lock()


def list_runs(root: Path) -> list[RunRow]:
    """Every run under root, oldest first (run ids start with their creation time)."""
    if not root.is_dir():
        return []
    # The recorder (event loop) and the screens (worker threads) list at the same time.
    with _ENDED_LOCK:
        return _list_runs(root)


def _list_runs(root: Path) -> list[RunRow]:
    rows = []
    for path in sorted(root.iterdir()):
        try:
            stat = (path / "run.json").stat()
        except OSError:
            continue
        key = (stat.st_mtime_ns, stat.st_size)
        cached = _ENDED_ROWS.get(path)
        if cached is not None and cached[0] == key:
            rows.append(cached[1])
            continue
        row = run_row(path)
        if row.status in ENDED_STATUSES and row.error is None:
            _ENDED_ROWS[path] = (key, row)
        rows.append(row)
    seen = {row.path for row in rows}
    for gone in [p for p in _ENDED_ROWS if p.parent == root and p not in seen]:
        del _ENDED_ROWS[gone]
    return rows


class DiskRuns:
    """The runs of one results folder as a front end reads them: the rows, and a run's
    summary through its cache of record."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def runs(self) -> list[RunRow]:
        return list_runs(self.root)

    def run_summary(self, run_id: str) -> RunSummary | None:
        """None for a run that is not there; raises `summary.UnreadableRun` (a ConsoleError
        whose message names the file and the reason) for one that cannot be read."""
        from console.bench.summary import load_summary

        run = self._run(run_id)
        return None if run is None else load_summary(run)

    def cached_summary(self, run_id: str) -> RunSummary | None:
        """The run's summary only when its `summary.json` is fresh (never rebuilt here: the
        flight recorder asks on the event loop); None otherwise."""
        from console.bench.summary import cached_summary

        run = self._run(run_id)
        return None if run is None else cached_summary(run)

    def _run(self, run_id: str) -> RunDir | None:
        if not run_id or "/" in run_id or run_id in (".", ".."):
            return None
        path = self.root / run_id
        if not (path / "run.json").is_file():
            return None
        return RunDir(path)
