"""Runs: `p` draws the selected run's plots one by one, at 80x24 and 200x50; `c` marks three
runs and shows them side by side."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable, Static

from console.bench.plotdata import Pareto
from console.tui.app import ConsoleApp
from console.tui.widgets.run_plot import RunPlot
from tests.tui import scene
from tests.tui.conftest import settle

BUDGETS = "20261129-185811-qwen-ddtree-budgets"
AGAIN = "20261129-190000-budgets-again"


def static_text(app: ConsoleApp, selector: str) -> str:
    """What a Static shows, as plain text at its width."""
    widget = app.screen.query_one(selector, Static)
    console = Console(width=widget.size.width or 160, file=io.StringIO(), color_system=None)
    with console.capture() as captured:
        console.print(widget.content)
    return captured.get()


@pytest.fixture
def backend(tmp_path: Path) -> scene.SceneBackend:
    """The scene with a third run: the budgets run again (its summary rebuilt)."""
    built = scene.backend(tmp_path / "scene")
    shutil.copytree(built.runs_root / BUDGETS, built.runs_root / AGAIN)
    for stale in (built.runs_root / AGAIN).glob("summary.*"):
        stale.unlink()
    return built


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
async def test_p_pages_through_the_runs_plots_and_back(
    backend: scene.SceneBackend, size: tuple[int, int]
) -> None:
    app = ConsoleApp(backend, mode="runs")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        screen = app.screen
        table = screen.query_one("#runs", DataTable)
        assert table.row_count == 3
        await pilot.press("down", "down")  # the oldest: the budgets run, four cells
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        plot = screen.query_one("#plot", RunPlot)
        assert screen.query_one("#plots").display
        assert not screen.query_one("#detail").display
        assert "plot 1/4" in static_text(app, "#plot-head")
        assert plot.size.height >= 8  # readable: the list gives the plot room
        shown = plot.plain
        assert "Output throughput" in shown
        assert "concurrency" in shown or size[1] < 30
        for load in ("1", "4"):
            assert load in shown
        titles = [plot.panel.title if plot.panel else ""]
        for _ in range(3):
            await pilot.press("p")
            await settle(pilot)
            titles.append(plot.panel.title if plot.panel else "")
        assert isinstance(plot.panel, Pareto)
        assert titles[1].startswith("Time to first token")
        assert titles[2].startswith("Inter-token latency")
        shown = plot.plain
        assert "Pareto" in shown
        assert "tokens/s per user = 1 / ITL p50" in static_text(app, "#plot-head")
        # The front's points are labelled: by load when narrow, by cell and load when wide.
        assert ("tp1 ddtree-b15 @1" if size[0] >= 120 else "@1") in shown
        # Moving to another run keeps the plot and shows that run's.
        await pilot.press("up")
        await settle(pilot)
        assert isinstance(plot.panel, Pareto)
        assert "20261129-185848-qwen-b15-recheck" in static_text(app, "#plot-head")
        assert {p.cell for p in plot.panel.points} == {"tp1 off", "tp1 ddtree-b15"}
        await pilot.press("p")  # after the last plot: the tables again
        await settle(pilot)
        assert screen.query_one("#detail").display
        assert not screen.query_one("#plots").display
        await pilot.press("p", "escape")
        await settle(pilot)
        assert screen.query_one("#detail").display


async def test_c_compares_three_runs_against_the_first_marked(
    backend: scene.SceneBackend,
) -> None:
    app = ConsoleApp(backend, mode="runs")
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await pilot.press("c", "down", "c", "down", "c")
        await settle(pilot)
        compared = static_text(app, "#detail-text")
        assert "TOK/S A / B / C" in compared
        assert f"A {AGAIN}" in compared
        assert f"C {BUDGETS}" in compared
        # Levels of 8 requests are too short for batch means: no change is judged.
        assert "no noise verdict" in compared
        # The list shows each marked run's letter.
        runs = app.screen.query_one("#runs", DataTable)
        labels = [str(runs.get_row_at(i)[0]) for i in range(runs.row_count)]
        assert [label[:2] for label in labels] == ["A ", "B ", "C "]
        await pilot.press("escape")
        await settle(pilot)
        assert "TOK/S A / B" not in static_text(app, "#detail-text")
        labels = [str(runs.get_row_at(i)[0]) for i in range(runs.row_count)]
        assert not any(label[:2] in ("A ", "B ", "C ") for label in labels)


async def test_a_plot_of_one_level_and_a_pareto_of_one_point_draw() -> None:
    """The smallest runs: one load level (a single tick), one point (its own front)."""
    from textual.app import App, ComposeResult

    from console.bench.plotdata import Line, ParetoPoint, Plot

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield RunPlot(id="plot")

    app = One()
    async with app.run_test(size=(80, 20)) as pilot:
        plot = app.query_one(RunPlot)
        plot.show(Plot("throughput", "Output throughput", "concurrency", "tok/s",
                       (Line("tp1 off", (8.0,), (0.0,)),)))  # fmt: skip
        await pilot.pause()
        assert "Output throughput" in plot.plain
        assert "8" in plot.plain
        plot.show(Pareto((ParetoPoint("tp1 off", "8", 12.5, 30.0, True),)))
        await pilot.pause()
        assert "@8" in plot.plain


async def test_three_runs_side_by_side_fit_80x24(backend: scene.SceneBackend) -> None:
    app = ConsoleApp(backend, mode="runs")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("c", "down", "c", "down", "c")
        await settle(pilot)
        compared = static_text(app, "#detail-text")
        assert "TOK/S A / B / C" in compared
        assert "no noise verdict: no per-request data or levels < 20 requests" in compared
        assert all(len(line) <= 78 for line in compared.splitlines())
