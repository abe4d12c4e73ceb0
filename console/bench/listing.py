"""The runs under a results folder, cheaply: metadata and progress, no request files read.

`runs list` and the TUI's Runs and Bench screens refresh from this while campaigns write;
the full summary (every request) is computed only for the run being looked at.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.bench.rundir import RunDir
from console.core.errors import ConsoleError


@dataclass(frozen=True)
class RunRow:
    run_id: str
    path: Path
    name: str | None
    kind: str | None
    status: str
    cells_done: int
    cells: int
    created_wall: float | None
    progress: dict[str, Any] | None
    """The running level of a live campaign: cell, level, done, planned."""
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "run_dir": str(self.path),
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "cells_done": self.cells_done,
            "cells": self.cells,
            "created_wall": self.created_wall,
            "progress": self.progress,
            "error": self.error,
        }


def run_row(path: Path) -> RunRow:
    run = RunDir(path)
    try:
        meta = run.meta()
    except ConsoleError as exc:
        return RunRow(path.name, path, None, None, "unreadable", 0, 0, None, None, exc.message)
    cells = [c for c in meta.get("cells", []) if isinstance(c, dict)]
    status = str(meta.get("status", "unknown"))
    progress = None
    if status == "running":
        if run.owner_alive() is None:
            status = "interrupted"
        else:
            progress = _progress(path)
    created = meta.get("created_wall")
    return RunRow(
        run_id=path.name,
        path=path,
        name=meta.get("name"),
        kind=meta.get("kind"),
        status=status,
        cells_done=sum(1 for c in cells if c.get("status") == "done"),
        cells=len(cells),
        created_wall=float(created) if isinstance(created, int | float) else None,
        progress=progress,
    )


def _progress(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / "progress.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# Rows of ended runs by folder, kept while their run.json is unchanged: the flight recorder
# asks for the running runs every few seconds, and a results folder can hold hundreds.
_ENDED_ROWS: dict[Path, tuple[tuple[int, int], RunRow]] = {}
ENDED_STATUSES = ("done", "failed", "interrupted")


def list_runs(root: Path) -> list[RunRow]:
    """Every run under root, oldest first (run ids start with their creation time)."""
    if not root.is_dir():
        return []
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
