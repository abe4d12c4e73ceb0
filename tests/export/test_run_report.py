"""`ddconsole runs report`: every format written from a recorded demo run, the SVGs parsed
and their series counted against the run's cells and levels, the HTML self-contained."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from console.bench.plotdata import RunPlots, cell_gpus, front_indices, run_plots
from console.bench.results import CellSummary, Knee, LevelSummary, RunSummary, Stats
from console.bench.rundir import RunDir
from console.bench.summary import load_summary
from console.export.report import write_report

FIXTURE = (
    Path(__file__).resolve().parent.parent
    / "tui"
    / "fixtures"
    / "runs"
    / "20261129-185811-qwen-ddtree-budgets"
)
SVG = "{http://www.w3.org/2000/svg}"
# The golden run: qwen3.6-27b tp1 with four variants, each at concurrency 1 and 4, on GPU 0.
CELLS = ("tp1 off", "tp1 ddtree-b15", "tp1 ddtree-b32", "tp1 ddtree-b64")
LOADS = 2


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The golden run copied to a scratch runs folder, its report written in every format."""
    runs = tmp_path_factory.mktemp("runs")
    run_path = runs / FIXTURE.name
    shutil.copytree(FIXTURE, run_path)
    run = RunDir(run_path)
    out = tmp_path_factory.mktemp("report")
    write_report(load_summary(run), cell_gpus(run.meta().cells), out, ("svg", "png", "md", "html"))
    return out


def series(path: Path) -> dict[str, list[tuple[float, float]]]:
    """Each plotted series of a report SVG by its id, with the vertices of its path."""
    root = ET.parse(path).getroot()
    found: dict[str, list[tuple[float, float]]] = {}
    for group in root.iter(f"{SVG}g"):
        gid = group.get("id", "")
        if gid.startswith(("series-", "pareto-")):
            found[gid] = _vertices(group)
    return found


def _vertices(group: ET.Element) -> list[tuple[float, float]]:
    """A line's vertices (its path's M/L points), or a scatter's points (one `use` each)."""
    uses = list(group.iter(f"{SVG}use"))
    if uses and group.get("id") == "pareto-points":
        return [(float(u.get("x", "0")), float(u.get("y", "0"))) for u in uses]
    for path in group.iter(f"{SVG}path"):
        numbers = re.findall(r"[ML]\s*(-?[\d.]+)\s+(-?[\d.]+)", path.get("d", ""))
        if numbers:
            return [(float(x), float(y)) for x, y in numbers]
    return []


def texts(path: Path) -> str:
    root = ET.parse(path).getroot()
    return "\n".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))


def test_every_format_is_written(report: Path) -> None:
    names = {p.name for p in report.iterdir()}
    for stem in ("throughput", "ttft", "itl", "pareto"):
        assert {f"{stem}.svg", f"{stem}.png"} <= names
    assert {"overview.png", "report.md", "report.html"} <= names
    # No SLO in this run: no goodput plot.
    assert "goodput.svg" not in names
    for png in report.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size > 10_000


def test_throughput_svg_has_a_line_per_cell_and_a_point_per_level(report: Path) -> None:
    drawn = series(report / "throughput.svg")
    assert len(drawn) == len(CELLS)
    assert all(len(points) == LOADS for points in drawn.values())
    words = texts(report / "throughput.svg")
    assert "concurrency (requests in flight)" in words
    assert "output tok/s" in words
    for cell in CELLS:
        assert cell in words  # the legend names each cell


@pytest.mark.parametrize(("stem", "axis"), [("ttft", "TTFT (ms)"), ("itl", "ITL (ms)")])
def test_latency_svgs_have_p50_and_p99_per_cell(report: Path, stem: str, axis: str) -> None:
    drawn = series(report / f"{stem}.svg")
    assert len(drawn) == 2 * len(CELLS)
    assert all(len(points) == LOADS for points in drawn.values())
    words = texts(report / f"{stem}.svg")
    assert axis in words
    assert "p99 dashed" in words


def test_pareto_svg_places_every_level_and_rings_the_front(report: Path) -> None:
    drawn = series(report / "pareto.svg")
    assert len(drawn["pareto-points"]) == len(CELLS) * LOADS
    # ddtree-b15 is fastest per GPU and per user at concurrency 1, and per GPU at 4: the
    # front holds exactly those two levels.
    assert len(drawn["pareto-front"]) == 2
    words = texts(report / "pareto.svg")
    assert "tokens/s per GPU = output tok/s / GPUs of the cell" in words
    assert "1 / ITL p50" in words
    assert "tp1 ddtree-b15 @1" in words
    assert "tp1 off @4" in words


class _Refs(HTMLParser):
    """Every tag and every attribute that could fetch something."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "data", "action") and value:
                self.refs.append(value)


def test_html_is_one_self_contained_page_with_every_plot(report: Path) -> None:
    page = (report / "report.html").read_text(encoding="utf-8")
    parser = _Refs()
    parser.feed(page)
    assert parser.tags.count("svg") == 4
    for banned in ("script", "link", "img", "iframe", "object", "embed"):
        assert banned not in parser.tags
    # Only references inside the page (an SVG's markers and clip paths).
    assert parser.refs
    assert all(ref.startswith("#") for ref in parser.refs), parser.refs
    assert "url(http" not in page
    assert "@import" not in page
    assert "<!DOCTYPE svg" not in page
    # Every id a plot refers to (markers, clip paths) is defined once in the page: the
    # plots inlined side by side do not take each other's.
    referenced = set(re.findall(r'(?:href="#|url\(#)([^")]+)', page))
    assert referenced
    for ref in referenced:
        assert page.count(f'id="{ref}"') == 1, ref
    # The level table: a row per cell and level, the front's rows marked.
    assert page.count("<tr") == 1 + len(CELLS) * LOADS
    assert page.count('<tr class="front">') == 2


def test_markdown_links_images_that_exist_and_tabulates_every_level(report: Path) -> None:
    text = (report / "report.md").read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert sorted(links) == ["itl.svg", "pareto.svg", "throughput.svg", "ttft.svg"]
    assert all((report / link).is_file() for link in links)
    rows = [line for line in text.splitlines() if line.startswith("| tp1 ")]
    assert len(rows) == len(CELLS) * LOADS
    # Every table row has as many cells as the header.
    header = next(line for line in text.splitlines() if line.startswith("| CELL"))
    assert all(row.count(" | ") == header.count(" | ") for row in rows)


def test_front_indices_keep_only_undominated_points() -> None:
    points = [(1.0, 5.0), (2.0, 4.0), (1.5, 3.0), (3.0, 1.0), (3.0, 0.5), (2.0, 4.0)]
    assert front_indices(points) == {0, 1, 3, 5}


def test_a_cell_without_a_gpu_count_stays_off_the_pareto_plot(tmp_path: Path) -> None:
    # A copy: loading a summary may rewrite its cache, never the checked-in fixture's.
    run = RunDir(Path(shutil.copytree(FIXTURE, tmp_path / FIXTURE.name)))
    summary = load_summary(run)
    gpus = cell_gpus(run.meta().cells)
    assert set(gpus.values()) == {1}
    gpus.pop("qwen3.6-27b/tp1/off")
    plots = run_plots(summary, gpus)
    assert plots.pareto is not None
    assert plots.pareto.left_out == ("tp1 off",)
    assert len(plots.pareto.points) == (len(CELLS) - 1) * LOADS


def test_cli_writes_the_report_and_says_how_to_install_matplotlib(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_path = tmp_path / "runs" / FIXTURE.name
    shutil.copytree(FIXTURE, run_path)
    result = cli("runs", "report", str(run_path), "--format", "md,html", "--json")
    assert result.code == 0, result.err
    written = json.loads(result.out)
    assert written["out"] == str(run_path / "report")
    assert {Path(f).name for f in written["files"]} >= {"report.md", "report.html", "pareto.svg"}
    bad = cli("runs", "report", str(run_path), "--format", "pdf")
    assert bad.code == 2
    assert "--format 'pdf': unknown pdf; choose from svg,png,md,html" in bad.err
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    missing = cli("runs", "report", str(run_path), "--out", str(tmp_path / "none"))
    assert missing.code == 1
    assert "pip install 'ddconsole[report]'" in missing.err
    assert "Traceback" not in missing.err
    assert not (tmp_path / "none").exists()


def test_matplotlib_stays_out_of_the_startup_path() -> None:
    """Importing the CLI, the TUI and the report's own modules, and listing runs, loads no
    matplotlib: only writing a report does."""
    import subprocess

    probe = (
        "import sys\n"
        "from console.cli import main\n"
        "import console.tui.app, console.export.report, console.bench.plotdata\n"
        "main(['runs', 'list'])\n"
        "print('MPL', 'matplotlib' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert "MPL False" in done.stdout, done.stderr


def _open_loop_run() -> RunSummary:
    """Two cells of a rate sweep judged against a TTFT SLO, tp4 beside tp1."""

    def level(index: int, rate: float, tok_s: float, good: float) -> LevelSummary:
        return LevelSummary(
            level=index,
            rate=rate,
            requests=20,
            output_tok_s=tok_s,
            goodput_tok_s=good,
            slo_attainment=good / tok_s,
            ttft=Stats(p50=0.05 * (index + 1), p99=0.1 * (index + 1)),
            itl=Stats(p50=0.01 * (index + 1), p99=0.02 * (index + 1)),
        )

    knee = Knee(kind="rate", value=2.0, first_failing=4.0, attainment=0.95, slo="TTFT ≤ 200 ms")
    cells = tuple(
        CellSummary(
            cell_id=f"m/{layout}/off",
            profile="m",
            layout=layout,
            variant="off",
            slo="TTFT ≤ 200 ms",
            knee=knee,
            levels=tuple(
                level(i, rate, scale * rate * 10, scale * rate * (10 - 3 * i))
                for i, rate in enumerate((1.0, 2.0, 4.0))
            ),
        )
        for layout, scale in (("tp1", 1.0), ("tp4", 3.0))
    )
    return RunSummary(run_id="20261202-000000-rates", run_dir="", name="rates", cells=cells)


def test_open_loop_levels_plot_against_rate_with_goodput(tmp_path: Path) -> None:
    summary = _open_loop_run()
    plots = run_plots(summary, {"m/tp1/off": 1, "m/tp4/off": 4})
    assert [p.key for p in plots.plots] == [
        "throughput-rate",
        "ttft-rate",
        "itl-rate",
        "goodput-rate",
    ]
    assert all(p.x_label == "request rate (req/s, open loop)" for p in plots.plots)
    goodput = plots.plots[-1]
    assert goodput.note == "SLO: TTFT ≤ 200 ms"
    assert goodput.lines[0].ys == (10.0, 14.0, 16.0)
    # Per GPU, tp4 moves three times the tokens on four GPUs: tp1 is ahead at every rate,
    # and per user (1 / ITL p50) the lowest rate is fastest: the front is tp1's levels.
    assert plots.pareto is not None
    assert {p.label for p in plots.pareto.front} == {"tp1 off @1/s", "tp1 off @2/s", "tp1 off @4/s"}
    written = write_report(summary, {"m/tp1/off": 1, "m/tp4/off": 4}, tmp_path, ("svg", "md"))
    assert {p.name for p in written} >= {"goodput-rate.svg", "throughput-rate.svg", "report.md"}
    assert len(series(tmp_path / "goodput-rate.svg")) == 2
    assert "request rate (req/s, open loop)" in texts(tmp_path / "throughput-rate.svg")
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "GOODPUT TOK/S | SLO MET" in report
    assert (
        "| tp1 off | 4/s | 1 | 40.0 | 40.0 | 33.3 | 150.0 | 300.0 | 30.0 | 60.0 | 16.0 | 40% |"
        in report
    )
    assert "- tp4 off: carries 2/s at TTFT ≤ 200 ms for 95% of requests, fails at 4/s" in report


def test_a_run_with_nothing_measured_still_gets_its_report(tmp_path: Path) -> None:
    failed = CellSummary(cell_id="m/tp1/off", profile="m", layout="tp1", variant="off")
    summary = RunSummary(run_id="20261202-000000-empty", run_dir="", cells=(failed,))
    written = write_report(summary, {}, tmp_path, ("svg", "png", "md", "html"))
    assert sorted(p.name for p in written) == ["report.html", "report.md"]
    assert "No level measured anything to plot." in (tmp_path / "report.md").read_text()


BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def test_html_opens_in_a_headless_browser_when_one_is_installed(report: Path) -> None:
    """The page as a real browser builds it: every plot's SVG in the DOM (skipped where no
    Chromium-family browser is installed; the SVG checks above stand in for it)."""
    import subprocess

    browser = next((b for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no headless browser installed (chromium, google-chrome)")
    done = subprocess.run(
        [browser, "--headless", "--disable-gpu", "--no-sandbox", "--dump-dom",
         (report / "report.html").as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("<svg") == 4
    assert "Pareto front" in done.stdout


def test_a_crowded_pareto_plot_labels_its_front_and_names_the_cells_in_a_legend(
    tmp_path: Path,
) -> None:
    """Six layouts at four concurrencies: 24 points, too many to label each; the front's
    are labelled, every cell is in the legend, and tp1 at 64 (cheapest per GPU) leads."""
    layouts = {"tp1": 1, "tp2": 2, "tp4": 4, "tp8": 8, "dp2": 2, "tp4dp2": 8}
    cells = []
    for layout, count in layouts.items():
        levels = []
        for index, concurrency in enumerate((1, 4, 16, 64)):
            tok_s = 30 * concurrency**0.8 * count**0.6
            itl = Stats(p50=concurrency / tok_s, p99=2 * concurrency / tok_s)
            levels.append(
                LevelSummary(
                    level=index, concurrency=concurrency, requests=10, output_tok_s=tok_s, itl=itl
                )
            )
        cell = CellSummary(cell_id=f"m/{layout}/off", profile="m", layout=layout, variant="off")
        cells.append(replace(cell, levels=tuple(levels)))
    summary = RunSummary(run_id="20261202-000000-layouts", run_dir="", cells=tuple(cells))
    gpus = {f"m/{layout}/off": count for layout, count in layouts.items()}
    write_report(summary, gpus, tmp_path, ("svg",))
    drawn = series(tmp_path / "pareto.svg")
    assert len(drawn["pareto-points"]) == 24
    words = texts(tmp_path / "pareto.svg").splitlines()
    assert "tp1 off @64" in words  # on the front: the most tokens per GPU
    assert "tp1 off @1" not in words  # not on the front: unlabelled
    for layout in layouts:
        assert f"{layout} off" in words  # the legend


def test_pareto_gpus_are_sglangs_world_size_dp_x_tp_x_pp(cli, tmp_path: Path) -> None:
    """A server given by URL: its GPUs from /server_info, pipeline stages included (SGLang
    0.5.23 `compute_world_size`), attention DP adding none; a plan's from its arguments."""
    from console.bench.results import CellMeta
    from tests.simproc import SMALL, running_sim

    with running_sim([*SMALL, "--tp-size", "2", "--pp-size", "2"], tmp_path) as sim:
        result = cli(
            "bench", "--url", sim.url, "--concurrency", "1", "--requests", "2",
            "--input-len", "64", "--output-len", "8", "--out", str(tmp_path / "runs"),
        )  # fmt: skip
    assert result.code == 0, result.err
    (folder,) = (tmp_path / "runs").iterdir()
    cells = RunDir(folder).meta().cells
    assert [cell.server_info and cell.server_info.get("pp_size") for cell in cells] == [2]
    assert list(cell_gpus(cells).values()) == [4]

    attention_dp = {"tp_size": 4, "dp_size": 1, "attn_dp_size": 4, "enable_dp_attention": True}
    assert cell_gpus([CellMeta(cell_id="c", server_info=attention_dp)]) == {"c": 4}
    plan = {"tp": 2, "dp": 2, "argv": ["python", "-m", "sglang.launch_server", "--pp-size=3"]}
    assert cell_gpus([CellMeta(cell_id="c", plan=plan)]) == {"c": 12}
    alias = {"tp": 2, "argv": ["--pipeline-parallel-size", "2"]}
    assert cell_gpus([CellMeta(cell_id="c", plan=alias)]) == {"c": 4}
    assert cell_gpus([CellMeta(cell_id="c", plan={"tp": 2, "dp": 2}, gpus=(0, 1))]) == {
        "c": 2
    }  # placed


def _rate_search_plots() -> RunPlots:
    """A rate search's plots as `runs report` draws them: doublings 1..512/s, then the
    bisection loads 560, 610, 720 and the limit 1000/s, one cell; its Pareto plot has a
    point per load, most of them crowded at the bottom right."""
    from console.bench.plotdata import Line, Pareto, ParetoPoint, Plot

    loads = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 560, 610, 720, 1000)
    per_gpu = (18.1, 27.6, 32.2, 31.5, 33.9, 32.6, 33.8, 33.7, 33.6, 31.0, 32.3, 32.8, 31.1, 30.6)
    per_user = (14.5, 9.0, 5.0, 2.5, 2.3, 2.2, 2.2, 2.2, 2.2, 2.1, 2.1, 2.1, 2.2, 2.1)
    cell = "http://127.0.0.1:38611"
    points = tuple(
        ParetoPoint(cell, f"{load}/s", x, y, on_front=load in (1, 2, 4, 16))
        for load, x, y in zip(loads, per_gpu, per_user, strict=True)
    )
    throughput = Plot(
        "throughput-rate", "Output throughput", "request rate (req/s, open loop)",
        "output tok/s", (Line(cell, tuple(float(x) for x in loads), per_gpu),),
    )  # fmt: skip
    return RunPlots(
        run_id="20261202-032814-uncapped", name=None, plots=(throughput,), pareto=Pareto(points)
    )


def _drawn(figure: Any) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return canvas.get_renderer()


def test_a_searchs_bisection_loads_get_readable_ticks_and_a_crowded_pareto_labels_its_front() -> (
    None
):
    """No two x tick labels overlap, the lowest and highest loads keep theirs; a Pareto plot
    of 14 points labels only its front, and every label lies inside the axes (none over the
    axis title below), in the single figures and on the overview page alike."""
    from console.export.report.figures import figures, overview

    plots = _rate_search_plots()
    checked = {"ticks": 0, "labels": 0}
    for figure in [figure for _, figure in figures(plots)] + [overview(plots)]:
        renderer = _drawn(figure)
        for ax in figure.axes:
            if ax.get_title() == "Output throughput":
                _assert_ticks_apart(ax, renderer)
                checked["ticks"] += 1
            elif ax.get_title().startswith("Pareto"):
                _assert_front_labelled_inside(ax, renderer)
                checked["labels"] += 1
    assert checked == {"ticks": 2, "labels": 2}  # a figure each and the overview's


def _assert_ticks_apart(ax: Any, renderer: Any) -> None:
    ticks = [t for t in ax.get_xticklabels() if t.get_text()]
    assert ticks[0].get_text() == "1"
    assert ticks[-1].get_text() == "1000"
    boxes = sorted((t.get_window_extent(renderer) for t in ticks), key=lambda b: b.x0)
    for left, right in itertools.pairwise(boxes):
        assert left.x1 < right.x0, [t.get_text() for t in ticks]


def _assert_front_labelled_inside(ax: Any, renderer: Any) -> None:
    labels = [text for text in ax.texts if "@" in text.get_text()]
    loads = sorted(t.get_text().rsplit("@", 1)[1] for t in labels)
    assert loads == sorted(["1/s", "2/s", "4/s", "16/s"])
    area = ax.get_window_extent(renderer)
    for text in labels:
        box = text.get_window_extent(renderer)
        assert area.x0 <= box.x0, text.get_text()
        assert box.x1 <= area.x1, text.get_text()
        assert area.y0 <= box.y0, text.get_text()
        assert box.y1 <= area.y1, text.get_text()
