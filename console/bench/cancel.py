"""Stop a running benchmark or campaign from another process, as Ctrl-C stops it.

The run's runner (the process named in its `owner.json`, by pid and start time) gets
SIGTERM; its handler sets the runner's stop event (console/cli/run_common.py), so the
level in progress is recorded as interrupted, the summary is rebuilt, the servers the
campaign launched are stopped, and the run stays resumable. `stop_run` waits for the
runner to end and says what is left.
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from console.bench.listing import Progress
from console.bench.rundir import RunDir
from console.bench.runmeta import RunMeta
from console.core.errors import ConsoleError, UsageError
from console.core.via_host import ddconsole_command

__all__ = [
    "RunDidNotStop",
    "RunNotRunning",
    "StoppedRun",
    "UnknownRun",
    "stop",
    "stop_prompt",
    "stop_run",
]

POLL_S = 0.1
EXIT_GRACE_S = 5.0
"""How long a runner that has recorded its end is waited for to exit."""


class UnknownRun(UsageError):
    """No run folder there (exit status 2)."""


class RunNotRunning(ConsoleError):
    """The run has ended (or never started): nothing to stop."""


class RunDidNotStop(ConsoleError):
    """The runner was signalled but had not ended when the wait was over."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoppedRun:
    """A run that was running and has now ended."""

    run_id: str
    run_dir: Path
    kind: str | None
    pid: int
    status: str
    """The run's status once stopped (`interrupted`, or `done` if it ended on its own)."""
    cells_done: int
    cells: int
    resume: str | None
    """How to continue it (a campaign's `--resume` command line), or None."""

    @property
    def message(self) -> str:
        what = "campaign" if self.kind == "campaign" else "run"
        done = f"{self.cells_done} of {self.cells} cell{'s' if self.cells != 1 else ''} done"
        tail = f"; results in {self.run_dir}"
        if self.resume:
            tail = f", resumable with `{self.resume}`"
        if self.status != "interrupted":
            return f"{what} {self.run_id} ended on its own ({self.status}): {done}{tail}"
        return f"stopped {what} {self.run_id}: {done}{tail}"

    def to_json(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "run_dir": str(self.run_dir),
            "kind": self.kind,
            "pid": self.pid,
            "status": self.status,
            "cells_done": self.cells_done,
            "cells": self.cells,
            "resume": self.resume,
            "message": self.message,
        }


def _open(run_dir: Path) -> tuple[RunDir, RunMeta]:
    if not (run_dir / "run.json").is_file():
        raise UnknownRun(f"no run at {run_dir} (no run.json)")
    run = RunDir(run_dir)
    return run, run.meta()


def _owner(run: RunDir) -> tuple[int, int | None] | None:
    """The runner's (pid, start ticks) when it is alive and is the process that claimed
    the run: same pid and start time, so a reused pid is never taken for it."""
    from console.hw.procs import argv_of, is_running

    try:
        owner = json.loads((run.path / "owner.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(owner, dict):
        return None
    pid, ticks = owner.get("pid"), owner.get("start_ticks")
    if not isinstance(pid, int) or pid <= 1:
        return None
    ticks = ticks if isinstance(ticks, int) else None
    if not is_running(pid, ticks):
        return None
    if ticks is None and not _looks_like_runner(argv_of(pid), run.path):
        # No start time to prove identity: only a console process is trusted.
        return None
    return pid, ticks


def _looks_like_runner(argv: tuple[str, ...], path: Path) -> bool:
    return str(path) in argv or any(
        part == "console" or Path(part).name == "ddconsole" for part in argv
    )


def _not_running(run: RunDir, meta: RunMeta) -> RunNotRunning:
    status = meta.status
    if status in ("running", "created"):
        status = "interrupted" if status == "running" else "not started"
    return RunNotRunning(
        f"run {run.run_id} is not running ({status}): nothing to stop",
        hint=f"`{ddconsole_command()} runs show {run.run_id}` shows what it did",
    )


def stop_prompt(run_dir: Path) -> str:
    """The question to confirm a stop with: `stop campaign NAME (cell 3/12, launched
    server ID)?`. RunNotRunning when there is nothing to stop."""
    run, meta = _open(run_dir)
    if _owner(run) is None:
        raise _not_running(run, meta)
    progress = _read_progress(run.path)
    what = "campaign" if meta.kind == "campaign" else "benchmark"
    parts: list[str] = []
    cell = progress.cell if progress is not None else None
    ids = [c.cell_id for c in meta.cells]
    if cell in ids and len(ids) > 1:
        parts.append(f"cell {ids.index(cell) + 1}/{len(ids)}")
    if progress is not None and progress.level is not None:
        parts.append(f"level {progress.level + 1}, {progress.done}/{progress.planned} requests")
    server = progress.server if progress is not None else None
    if meta.kind == "campaign" and server:
        parts.append(f"launched server {server}")
    detail = f" ({', '.join(parts)})" if parts else ""
    return f"stop {what} {meta.name or run.run_id}{detail}?"


def _read_progress(path: Path) -> Progress | None:
    try:
        return Progress.from_json(json.loads((path / "progress.json").read_text()))
    except (OSError, ValueError):
        return None


def stop(run_dir: Path, *, timeout_s: float = 30.0) -> StoppedRun:
    """SIGTERM the run's runner and wait (up to `timeout_s`) until it has ended.

    UnknownRun (no run there), RunNotRunning (nothing to stop), RunDidNotStop (still
    running when the wait was over; it goes on stopping)."""
    from console.hw.procs import is_running, send_signal

    run, meta = _open(run_dir)
    owner = _owner(run)
    if owner is None:
        raise _not_running(run, meta)
    pid, ticks = owner
    if not send_signal(pid, signal.SIGTERM, ticks):
        raise _not_running(run, run.meta())
    deadline = time.monotonic() + timeout_s
    ended_at: float | None = None
    while True:
        # Stopped when the runner has exited. One that lives on after giving up its claim
        # and writing the final status (a console that ran the run in-process) is given
        # `EXIT_GRACE_S` more, then taken as stopped.
        if not is_running(pid, ticks):
            meta = run.meta()
            break
        meta = run.meta()
        if ended_at is None and run.owner_alive() is None and meta.status != "running":
            ended_at = time.monotonic()
        if ended_at is not None and time.monotonic() - ended_at >= EXIT_GRACE_S:
            break
        if time.monotonic() >= deadline:
            raise RunDidNotStop(
                f"run {run.run_id} (pid {pid}) was asked to stop but is still running "
                f"after {timeout_s:g} s (it may be stopping its server)",
                hint=f"`{ddconsole_command()} runs show {run.run_id}` shows when it has ended",
            )
        time.sleep(POLL_S)
    status = meta.status if meta.status != "running" else "interrupted"
    return StoppedRun(
        run_id=run.run_id,
        run_dir=run.path,
        kind=meta.kind,
        pid=pid,
        status=status,
        cells_done=sum(1 for c in meta.cells if c.status == "done"),
        cells=len(meta.cells),
        resume=_resume_command(meta) if status == "interrupted" else None,
    )


def stop_run(run_dir: Path, *, timeout_s: float = 30.0) -> str:
    """Stop the run in `run_dir` cleanly and wait for it; a one-line account of it."""
    return stop(run_dir, timeout_s=timeout_s).message


def _resume_command(meta: RunMeta) -> str | None:
    """The command that continues an interrupted campaign (benchmarks do not resume)."""
    if meta.kind != "campaign":
        return None
    source = meta.campaign_file
    if isinstance(meta.request, dict):
        stored = meta.request.get("source")
        source = stored if isinstance(stored, str) else source
    demo = " --demo" if meta.is_demo else ""
    return f"{ddconsole_command()} campaign {source or 'FILE'} --resume {meta.run_id}{demo}"
