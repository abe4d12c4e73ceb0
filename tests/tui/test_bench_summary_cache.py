"""The Bench screen asks for the selected run's summary on every list refresh; a finished run
is computed once and then served from its cache of record, not rebuilt from its request
files each time."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from console.bench import summary as summary_module
from console.bench.listing import DiskRuns, RunRow
from console.bench.results import RunSummary
from console.bench.rundir import RunDir
from console.profiles.loader import ProfileCatalog
from console.telemetry.store import TimeSeriesStore
from console.topology.model import Topology
from console.tui.app import ConsoleApp
from console.tui.headless import StaticBackend
from console.tui.screens import bench
from tests.tui.conftest import settle, until

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "runs" / "20261129-185848-qwen-b15-recheck"
SOURCES = ("run.json", "levels.jsonl", "requests.jsonl", "telemetry.jsonl", "progress.json")


class DiskBackend(StaticBackend):
    """A frozen host whose runs come from a results folder, as the live backend's do, and
    whose version moves on every tick (as a live store's does), so screens keep refreshing."""

    def __init__(self, root: Path) -> None:
        super().__init__(
            store=TimeSeriesStore(),
            now_mono=0.0,
            servers=[],
            topology=Topology(source="test", gpus=(), numa_nodes=()),
            runs_root=root,
            demo=True,
            catalog=ProfileCatalog(),
        )
        self.disk = DiskRuns(root)
        self.summaries_asked = 0
        self._ticks = 0

    def version(self) -> int:
        self._ticks += 1
        return self._ticks

    def runs(self) -> list[RunRow]:
        return self.disk.runs()

    def run_summary(self, run_id: str) -> RunSummary | None:
        self.summaries_asked += 1
        return self.disk.run_summary(run_id)


async def test_a_finished_run_is_not_rebuilt_every_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "runs" / FIXTURE.name
    run.mkdir(parents=True)
    for name in SOURCES:
        shutil.copy2(FIXTURE / name, run / name)  # no summary.json: the first ask builds it
    builds: list[str] = []
    build = summary_module.summarize_run

    def counted(run_dir: RunDir) -> RunSummary:
        builds.append(run_dir.run_id)
        return build(run_dir)

    monkeypatch.setattr(summary_module, "summarize_run", counted)
    monkeypatch.setattr(bench, "LIST_EVERY_S", 0.05)
    backend = DiskBackend(tmp_path / "runs")
    app = ConsoleApp(backend, mode="bench", refresh_s=0.05)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        await until(pilot, lambda: backend.summaries_asked >= 8, 20, "the summary asked for")
        await asyncio.sleep(0.2)
        await settle(pilot)
    assert builds == [FIXTURE.name]
    assert (run / "summary.json").is_file()
