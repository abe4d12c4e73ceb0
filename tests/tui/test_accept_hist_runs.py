"""The Runs detail shows each level's acceptance histogram (accepted drafts per verify step),
side by side as the width allows, from a run recorded on the simulator (DDTree budgets 15,
32 and 64 on Qwen3.6-27B at concurrency 1 and 4, 4 requests of 128 tokens each)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from rich.console import Console
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.widgets import Static

from console.bench.listing import DiskRuns
from console.cli.services import Services
from console.tui.app import ConsoleApp
from console.tui.screens.runs import RunsScreen
from console.tui.widgets.accept_hist import TITLE, level_block
from tests.tui import scene
from tests.tui.conftest import settle, until

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "accept_hist_runs"
RUN = "20261202-003643-qwen-accept-hist"
# A fixed path: the detail shows where the run's files are, so snapshots must not vary.
SHOWN_ROOT = scene.ROOT.with_name("ddconsole-accept-hist")


def detail_text(screen: RunsScreen, width: int) -> str:
    """The detail pane as text: the run's tables, then its acceptance histograms."""
    console = Console(width=width, record=True)
    console.print(screen.query_one("#detail-text", Static).content)
    console.print(screen.query_one("#detail-accept", Static).content)
    return console.export_text()


async def _open_run(app: ConsoleApp, pilot: Pilot[None]) -> RunsScreen:
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, RunsScreen)
    await until(pilot, lambda: screen.shown == RUN, what="the run's detail")
    await settle(pilot)
    return screen


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
async def test_runs_detail_shows_each_levels_histogram(tmp_path: Path, size: tuple[int, int]):
    services = Services.create(demo=True)
    services.state.runs.mkdir(parents=True, exist_ok=True)
    shutil.copytree(FIXTURES / RUN, services.state.runs / RUN)
    app = ConsoleApp(services.live_backend(recordings=None), mode="runs")
    async with app.run_test(size=size) as pilot:
        screen = await _open_run(app, pilot)
        width = screen.query_one("#detail").size.width - 2
        text = detail_text(screen, width)
    assert TITLE in text
    summary = json.loads((services.state.runs / RUN / "summary.json").read_text())
    levels = [(c, lv) for c in summary["cells"] for lv in c["levels"]]
    assert len(levels) == 6
    for _cell, level in levels:
        heading = f"conc {level['concurrency']} · drop at draft {level['accept_drop_position']}"
        assert heading in text
    b32 = next(lv for c, lv in levels if c["variant"] == "ddtree-b32")
    assert f"{sum(b32['correct_drafts_histogram'])} steps · 4/4 requests" in text
    lines = text.splitlines()
    assert all(len(line.rstrip()) <= width for line in lines)
    side_by_side = max(line.count("conc ") for line in lines)
    assert side_by_side == (2 if size[0] == 80 else 3)  # the three budgets, at 200


def test_a_levels_block_has_a_row_per_count_with_its_share_of_the_steps(tmp_path: Path) -> None:
    """Budget 32 at concurrency 1: nine counts, each its own row, its share of the steps."""
    shutil.copytree(FIXTURES / RUN, tmp_path / RUN)
    summary = DiskRuns(tmp_path).run_summary(RUN)
    assert summary is not None
    cell = next(c for c in summary.cells if c.variant == "ddtree-b32")
    level = cell.levels[0]
    histogram = level.correct_drafts_histogram
    assert histogram is not None
    block = level_block(cell, level)
    assert block is not None
    rows = block.plain.splitlines()[4:]
    steps = sum(histogram)
    assert len(rows) == len(histogram)
    for count, (row, n) in enumerate(zip(rows, histogram, strict=True)):
        label, share = row.split()[0], row.split()[-1]
        assert (label, share) == (str(count), f"{n / steps:.0%}")
    # The longest bar is the most common count; an empty count has none.
    longest = max(range(len(rows)), key=lambda i: rows[i].count("█"))
    assert histogram[longest] == max(histogram)
    assert all("█" not in row for row, n in zip(rows, histogram, strict=True) if n == 0)


def _shown_runs_root() -> Path:
    """The fixture runs copied to a fixed path (a symlink to a folder named by their content
    and the bench code whose summary.json the folder caches), written once and shared by
    every test process, as the scene is."""
    digest = hashlib.sha256()
    bench = Path(__file__).resolve().parents[2] / "console" / "bench"
    for path in [*sorted(FIXTURES.rglob("*")), *sorted(bench.glob("*.py"))]:
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    built = SHOWN_ROOT.with_name(f"{SHOWN_ROOT.name}.{digest.hexdigest()[:16]}")
    if SHOWN_ROOT.resolve() == built.resolve() and (built / ".complete").exists():
        return SHOWN_ROOT / "runs"
    with SHOWN_ROOT.with_name(f"{SHOWN_ROOT.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (built / ".complete").exists():
            staging = Path(tempfile.mkdtemp(prefix=f"{SHOWN_ROOT.name}.staging-", dir=built.parent))
            shutil.copytree(FIXTURES, staging / "runs")
            (staging / ".complete").touch()
            shutil.rmtree(built, ignore_errors=True)
            staging.rename(built)
        if SHOWN_ROOT.resolve() != built.resolve():
            if SHOWN_ROOT.is_dir() and not SHOWN_ROOT.is_symlink():
                shutil.rmtree(SHOWN_ROOT)
            link = SHOWN_ROOT.with_name(f"{SHOWN_ROOT.name}.link-{os.getpid()}")
            with contextlib.suppress(FileNotFoundError):
                link.unlink()
            link.symlink_to(built.name)
            link.replace(SHOWN_ROOT)
    return SHOWN_ROOT / "runs"


class HistBackend(scene.SceneBackend):
    """The fixed scene, its runs folder holding the recorded histogram run only."""

    def __init__(self) -> None:
        super().__init__(scene.ROOT)
        self.runs_root = _shown_runs_root()


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_runs_detail_histograms_snapshot(snap_compare, size: tuple[int, int]) -> None:
    app = ConsoleApp(HistBackend(), mode="runs")

    async def at_histograms(pilot: Pilot[None]) -> None:
        await _open_run(app, pilot)
        pane = app.screen.query_one("#detail", VerticalScroll)
        pane.scroll_to_widget(pane.query_one("#detail-accept"), animate=False, top=True)
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=at_histograms)
