"""The flight recorder's runs: summaries are never built on the event loop (a stale one is
built on a worker thread and recorded at a later poll), one unreadable run does not stop the
recording, and a run resumed and ended again is recorded again. Real monitor, real files."""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from console.bench import summary as summary_module
from console.bench.listing import DiskRuns
from console.bench.results import RunSummary
from console.bench.rundir import RunDir
from console.cli.services import Services
from console.server import session_recorder
from console.server.session_recorder import SessionRecorder
from console.telemetry.recording import read_recording

FIXTURES = Path(__file__).resolve().parents[1] / "tui" / "fixtures" / "runs"
GOOD = "20261129-185811-qwen-ddtree-budgets"
DAMAGED = "20261129-185848-qwen-b15-recheck"


def runs_folder(root: Path) -> Path:
    """Two ended fixture runs with stale summaries (none on disk); the newer one damaged."""
    for run_id in (GOOD, DAMAGED):
        shutil.copytree(FIXTURES / run_id, root / run_id)
        for name in ("summary.json", "summary.csv", "summary.md"):
            (root / run_id / name).unlink()
    requests = root / DAMAGED / "requests.jsonl"
    requests.unlink()
    requests.mkdir()
    return root


async def wait_for(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def recorder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[SessionRecorder, DiskRuns, list[bool]]:
    """A recorder of a demo monitor polled every 50 ms, listing runs every 0.1 s; the
    returned list gets, per summary built, whether it was built on the event loop's thread."""
    monkeypatch.setattr(session_recorder, "RUNS_EVERY_S", 0.1)
    services = Services.create(demo=True)
    monitor = services.monitor(interval_s=0.05)
    disk = DiskRuns(runs_folder(tmp_path / "runs"))
    loop_thread = threading.get_ident()
    on_loop: list[bool] = []
    build = summary_module.summarize_run

    def counted(run: RunDir) -> RunSummary:
        on_loop.append(threading.get_ident() == loop_thread)
        return build(run)

    monkeypatch.setattr(summary_module, "summarize_run", counted)
    made = SessionRecorder(
        monitor,
        tmp_path / "recordings",
        demo=True,
        topology=services.topology(),
        runs=disk.runs,
        run_summary=disk.run_summary,
        cached_summary=disk.cached_summary,
    )
    return made, disk, on_loop


async def test_summaries_are_built_off_the_loop_and_a_damaged_run_stops_nothing(
    recorder: tuple[SessionRecorder, DiskRuns, list[bool]],
) -> None:
    rec, _, on_loop = recorder
    polls: list[float] = []
    rec.start()
    rec.monitor.poller.listeners.append(lambda now, result: polls.append(now))
    await rec.monitor.start()
    try:
        await wait_for(lambda: GOOD in rec._summarized, "the good run's summary recorded")
        await wait_for(lambda: DAMAGED not in rec._summaries_due, "the damaged run tried")
        seen = len(polls)
        await wait_for(lambda: len(polls) >= seen + 5, "polls after the damaged run")
        assert rec.error is None
        assert rec.writer is not None  # still recording
    finally:
        await rec.monitor.stop()
        rec.close()
    assert on_loop, "the stale summary was built"
    assert not any(on_loop), "a summary was built on the event loop"
    assert DAMAGED not in rec._summarized
    assert rec.path is not None
    frames = read_recording(rec.path).frames
    summaries = [f for f in frames if f.kind == "run_summary"]
    assert len(summaries) == 1
    said = [str(f.data["v"]) for f in frames if f.kind == "event"]
    assert any(f"run {DAMAGED} is unreadable" in text and "Is a directory" in text for text in said)
    assert [f.kind for f in frames].count("poll") >= 5


async def test_a_run_that_ends_again_is_recorded_again(
    recorder: tuple[SessionRecorder, DiskRuns, list[bool]],
) -> None:
    rec, disk, on_loop = recorder
    run = RunDir(disk.root / GOOD)
    rec.start()
    await rec.monitor.start()
    try:
        await wait_for(lambda: GOOD in rec._summarized, "the first summary recorded")
        # Resumed: running under a live owner (this process), then ended again, changed.
        run.claim()
        run.update_meta(lambda meta: replace(meta, status="running"))
        await wait_for(
            lambda: any(r.run_id == GOOD and r.status == "running" for r in rec._runs),
            "the resumed run listed as running",
        )
        run.update_meta(lambda meta: replace(meta, status="done", name="ended-again"))
        run.release()
        await wait_for(
            lambda: getattr(rec._summarized.get(GOOD), "name", None) == "ended-again",
            "the new summary recorded",
        )
    finally:
        await rec.monitor.stop()
        rec.close()
    assert not any(on_loop)
    assert rec.path is not None
    names = [
        f.data["v"].get("name") for f in read_recording(rec.path).frames if f.kind == "run_summary"
    ]
    assert names == ["qwen-ddtree-budgets", "ended-again"]
