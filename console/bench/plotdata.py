"""What a run's plots show, as numbers (pure): throughput, latency percentiles and goodput
against load with a line per cell, and the Pareto front of per-user against per-GPU speed.

The report (`console.export.report`, matplotlib) and the Runs screen (plotext) both draw
from these, so the two pictures agree. Closed-loop levels are plotted against their
concurrency, open-loop levels against their request rate, each kind on plots of its own.
Interrupted levels and levels without the figure are left out of that figure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from console.bench.results import CellMeta, CellSummary, LevelSummary, RunSummary

PER_USER = "tokens/s per user = 1 / ITL p50 (a request's median decode speed, first token excluded)"
PER_GPU = "tokens/s per GPU = output tok/s / GPUs of the cell"
LOAD_KINDS = ("concurrency", "rate")
X_LABELS = {
    "concurrency": "concurrency (requests in flight)",
    "rate": "request rate (req/s, open loop)",
}


@dataclass(frozen=True, slots=True)
class Line:
    """One cell's figure at each of its levels (x ascending)."""

    label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    dashed: bool = False
    """A second percentile of the same cell (p99 beside p50)."""


@dataclass(frozen=True, slots=True)
class Plot:
    """A figure against load: its file stem (`throughput`, `ttft-rate`), titles and lines."""

    key: str
    title: str
    x_label: str
    y_label: str
    lines: tuple[Line, ...]
    note: str | None = None


@dataclass(frozen=True, slots=True)
class ParetoPoint:
    cell: str
    load: str
    per_gpu: float
    per_user: float
    on_front: bool

    @property
    def label(self) -> str:
        return f"{self.cell} @{self.load}"


@dataclass(frozen=True, slots=True)
class Pareto:
    """Every (cell, level) as tokens/s per GPU (x) and per user (y); the front is the
    points no other point beats on both."""

    points: tuple[ParetoPoint, ...]
    left_out: tuple[str, ...] = ()
    """Cells with no known GPU count (a server given by URL whose /server_info said none)."""

    title = "Pareto front: tokens/s per user against tokens/s per GPU"
    x_label = PER_GPU
    y_label = PER_USER

    @property
    def front(self) -> tuple[ParetoPoint, ...]:
        """The front's points by tokens/s per GPU."""
        return tuple(sorted((p for p in self.points if p.on_front), key=lambda p: p.per_gpu))


@dataclass(frozen=True, slots=True)
class RunPlots:
    run_id: str
    name: str | None
    plots: tuple[Plot, ...]
    pareto: Pareto | None
    slo: str | None = None
    """The latency targets its cells were judged by (`TTFT ≤ 200 ms`), when any."""
    knees: tuple[tuple[str, str], ...] = ()
    """(cell label, the highest load that met the SLO, in words) per cell searched."""

    @property
    def empty(self) -> bool:
        return not self.plots and self.pareto is None


def cell_labels(cells: Sequence[CellSummary]) -> dict[str, str]:
    """A short, distinct label per cell id: `tp1 ddtree-b15`, with the profile in front only
    when the run has several models."""
    profiles = {cell.profile for cell in cells}
    labels: dict[str, str] = {}
    for cell in cells:
        if cell.profile is None:
            labels[cell.cell_id] = cell.server or cell.cell_id
        elif len(profiles) > 1:
            labels[cell.cell_id] = f"{cell.profile} {cell.layout} {cell.variant}"
        else:
            labels[cell.cell_id] = f"{cell.layout} {cell.variant}"
    if len(set(labels.values())) < len(labels):
        return {cell.cell_id: cell.key for cell in cells}
    return labels


def load_kind(level: LevelSummary) -> str | None:
    """`rate` for an open-loop level, `concurrency` for a closed-loop one."""
    if level.rate is not None:
        return "rate"
    return "concurrency" if level.concurrency is not None else None


def _load(level: LevelSummary) -> float:
    return float(level.rate if level.rate is not None else level.concurrency or 0)


def _measured(cell: CellSummary, kind: str) -> list[LevelSummary]:
    """The cell's levels of one load kind that measured something, by load."""
    levels = [
        level
        for level in cell.levels
        if level.status != "interrupted" and level.requests > 0 and load_kind(level) == kind
    ]
    return sorted(levels, key=_load)


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


def goodput(level: LevelSummary) -> float | None:
    """The level's goodput (output tok/s of requests meeting every SLO target), when the
    summary has one."""
    value = getattr(level, "goodput_tok_s", None)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def attainment(level: LevelSummary) -> float | None:
    """The share of the level's requests that met every SLO target, when known."""
    value = getattr(level, "slo_attainment", None)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


Getter = Callable[[LevelSummary], float | None]


def _line(
    label: str, levels: Sequence[LevelSummary], value: Getter, *, dashed: bool = False
) -> Line | None:
    points = [(_load(level), value(level)) for level in levels]
    kept = [(x, float(y)) for x, y in points if y is not None]
    if not kept:
        return None
    return Line(label, tuple(x for x, _ in kept), tuple(y for _, y in kept), dashed)


# (key, title, y label, [(label suffix, getter, dashed)], note)
_FIGURES: tuple[tuple[str, str, str, tuple[tuple[str, Getter, bool], ...], str | None], ...] = (
    (
        "throughput",
        "Output throughput",
        "output tok/s",
        (("", lambda lv: lv.output_tok_s, False),),
        None,
    ),
    (
        "ttft",
        "Time to first token (p50 solid, p99 dashed)",
        "TTFT (ms)",
        (
            (" p50", lambda lv: _ms(lv.ttft.p50), False),
            (" p99", lambda lv: _ms(lv.ttft.p99), True),
        ),
        None,
    ),
    (
        "itl",
        "Inter-token latency per request (p50 solid, p99 dashed)",
        "ITL (ms)",
        (
            (" p50", lambda lv: _ms(lv.itl.p50), False),
            (" p99", lambda lv: _ms(lv.itl.p99), True),
        ),
        "ITL: (last token - first token) / (output tokens - 1), per request (vLLM's TPOT)",
    ),
    (
        "goodput",
        "Goodput (output tok/s of requests meeting the SLO)",
        "goodput tok/s",
        (("", goodput, False),),
        None,
    ),
)


def run_plots(summary: RunSummary, gpus: Mapping[str, int] | None = None) -> RunPlots:
    """Every plot of the run; `gpus` (cell id -> GPU count, `cell_gpus`) places the cells
    on the Pareto plot, which is left out when no cell's count is known."""
    labels = cell_labels(summary.cells)
    slo = slo_text(summary)
    plots: list[Plot] = []
    for kind in LOAD_KINDS:
        measured = [(cell, _measured(cell, kind)) for cell in summary.cells]
        measured = [(cell, levels) for cell, levels in measured if levels]
        if not measured:
            continue
        suffix = "" if kind == "concurrency" else "-rate"
        for key, title, y_label, parts, note in _FIGURES:
            lines = [
                line
                for cell, levels in measured
                for tail, getter, dashed in parts
                if (line := _line(labels[cell.cell_id] + tail, levels, getter, dashed=dashed))
            ]
            if key == "goodput" and slo:
                note = f"SLO: {slo}"
            if lines:
                plots.append(Plot(key + suffix, title, X_LABELS[kind], y_label, tuple(lines), note))
    return RunPlots(
        run_id=summary.run_id,
        name=summary.name,
        plots=tuple(plots),
        pareto=pareto(summary, gpus or {}, labels),
        slo=slo,
        knees=knees(summary, labels),
    )


def slo_text(summary: RunSummary) -> str | None:
    """The SLO the run's cells were judged by; each cell's when they differ."""
    found = [str(s) for cell in summary.cells if (s := getattr(cell, "slo", None))]
    distinct = list(dict.fromkeys(found))
    return "; ".join(distinct) if distinct else None


def knees(summary: RunSummary, labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Each searched cell's knee in words (`carries 24 concurrent at TTFT ≤ 200 ms ...`)."""
    out = []
    for cell in summary.cells:
        knee = getattr(cell, "knee", None)
        text = getattr(knee, "text", None)
        if callable(text):
            out.append((labels[cell.cell_id], str(text())))
    return tuple(out)


def pareto(
    summary: RunSummary, gpus: Mapping[str, int], labels: Mapping[str, str] | None = None
) -> Pareto | None:
    """The run's levels placed by tokens/s per GPU and per user, the front marked; None when
    no level can be placed."""
    labels = labels or cell_labels(summary.cells)
    placed: list[tuple[str, str, float, float]] = []
    left_out: list[str] = []
    for cell in summary.cells:
        count = gpus.get(cell.cell_id)
        levels = [lv for kind in LOAD_KINDS for lv in _measured(cell, kind)]
        if not count:
            if levels:
                left_out.append(labels[cell.cell_id])
            continue
        for level in levels:
            if level.output_tok_s is None or not level.itl.p50:
                continue
            placed.append(
                (
                    labels[cell.cell_id],
                    level.load_label,
                    level.output_tok_s / count,
                    1 / level.itl.p50,
                )
            )
    if not placed:
        return None
    front = front_indices([(x, y) for _, _, x, y in placed])
    points = tuple(
        ParetoPoint(cell, load, x, y, index in front)
        for index, (cell, load, x, y) in enumerate(placed)
    )
    return Pareto(points, tuple(left_out))


def front_indices(points: Sequence[tuple[float, float]]) -> set[int]:
    """The points no other point matches or beats on both axes while beating on one
    (higher is better on both)."""
    front = set()
    for i, (x, y) in enumerate(points):
        dominated = any(
            ox >= x and oy >= y and (ox > x or oy > y)
            for j, (ox, oy) in enumerate(points)
            if j != i
        )
        if not dominated:
            front.add(i)
    return front


PP_FLAGS = ("--pp-size", "--pipeline-parallel-size")
"""SGLang 0.5.23's pipeline-parallel flag and its alias (srt/arg_groups/fields/parallel.py)."""


def gpu_count(cell: CellMeta) -> int | None:
    """The GPUs a cell's server ran on: its placed GPUs, else SGLang's world size
    dp x tp x pp (srt/server_args.py `compute_world_size`) from its plan (pp from the plan's
    arguments) or its /server_info (a server given by URL); None when nothing says the tp.
    Attention DP runs inside the TP group and adds no GPUs."""
    if cell.gpus:
        return len(cell.gpus)
    info = cell.server_info or {}
    plan = cell.plan or {}
    tp = cell.tp or _count(plan.get("tp")) or _count(info.get("tp_size"))
    dp = _count(plan.get("dp")) or _count(info.get("dp_size")) or 1
    pp = (
        _count(plan.get("pp"))
        or _flag_count(plan.get("argv"), PP_FLAGS)
        or _count(info.get("pp_size"))
        or 1
    )
    return tp * dp * pp if tp else None


def _flag_count(argv: object, flags: Sequence[str]) -> int | None:
    """The positive integer a command line gives one of `flags` (`--flag N` or
    `--flag=N`; the last one wins, as argparse takes it); None when absent or not one."""
    if not isinstance(argv, list | tuple):
        return None
    words = [str(word) for word in argv]
    found: int | None = None
    for i, word in enumerate(words):
        name, equals, value = word.partition("=")
        if name not in flags:
            continue
        text = value if equals else (words[i + 1] if i + 1 < len(words) else "")
        found = int(text) if text.isdigit() and int(text) > 0 else found
    return found


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def cell_gpus(cells: Sequence[CellMeta]) -> dict[str, int]:
    """Cell id -> GPU count, for the cells whose count is known."""
    return {cell.cell_id: n for cell in cells if (n := gpu_count(cell)) is not None}


def run_folder_gpus(folder: Path) -> dict[str, int]:
    """`cell_gpus` of the run in `folder`; empty when its run.json cannot be read (a
    replayed run whose folder is elsewhere)."""
    from console.bench.rundir import RunDir
    from console.core.errors import ConsoleError

    if not (folder / "run.json").is_file():
        return {}
    try:
        return cell_gpus(RunDir(folder).meta().cells)
    except ConsoleError:
        return {}
