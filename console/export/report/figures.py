"""A run's plots drawn with matplotlib (Agg, no display): one figure per plot, and all of
them on one page (the overview).

Each plotted series carries an SVG id (`series-N` for a line, `pareto-points` and
`pareto-front` on the Pareto plot), so a reader of the SVG can count what was drawn.
Text stays text in the SVG (no glyph outlines): labels can be searched and read.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from console.bench.plotdata import PER_GPU, PER_USER, Pareto, ParetoPoint, Plot, RunPlots

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Colour per cell, the same in every figure of a report (matplotlib's tab10).
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
FRONT_COLOR = "#d62728"
LABEL_ALL_UP_TO = 8
"""A Pareto plot with more points, or whose labels find no free place near their points
(`LABEL_OFFSETS`), labels only its front's (a legend names the cells)."""
LABEL_OFFSETS = (4, -10, 16, -22)
"""Vertical places (points) a Pareto label may take beside its point, nearest first."""
RIGHT_ALIGN_FROM = 0.55
"""A Pareto point this far along the x axis (of its limit) has its label on its left."""
MIN_TICK_GAP = 0.08
"""Measured loads closer than this share of the x axis to a kept tick get no tick label
of their own (a search's bisection loads: 512, 560, 610 on a 1-1000 axis)."""


def _pyplot_free() -> None:
    """matplotlib set to draw off screen (before anything imports pyplot)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",
            "font.size": 9,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )


def colors(plots: RunPlots) -> dict[str, str]:
    """A colour per cell label, in the order the cells first appear."""
    cells: list[str] = []
    for plot in plots.plots:
        for line in plot.lines:
            cell = _cell_of(line.label, plot)
            if cell not in cells:
                cells.append(cell)
    if plots.pareto is not None:
        for point in plots.pareto.points:
            if point.cell not in cells:
                cells.append(point.cell)
    return {cell: PALETTE[i % len(PALETTE)] for i, cell in enumerate(cells)}


def _cell_of(label: str, plot: Plot) -> str:
    """The cell a line belongs to: its label without the percentile suffix."""
    has_suffix = any(line.label.endswith((" p50", " p99")) for line in plot.lines)
    return label.rsplit(" ", 1)[0] if has_suffix else label


def draw_plot(ax: Axes, plot: Plot, palette: dict[str, str]) -> None:
    """A figure against load: a line per cell (a dashed one for its second percentile)."""
    loads: set[float] = set()
    for index, line in enumerate(plot.lines):
        cell = _cell_of(line.label, plot)
        # The legend names each cell once; the title says which percentile is dashed.
        label = f"_{line.label}" if line.dashed else cell
        ax.plot(
            line.xs,
            line.ys,
            marker="o",
            markersize=4,
            linestyle="--" if line.dashed else "-",
            color=palette.get(cell, PALETTE[0]),
            label=label,
            gid=f"series-{index}",
        )
        loads.update(line.xs)
    _load_axis(ax, sorted(loads))
    ax.set_title(plot.title)
    ax.set_xlabel(plot.x_label)
    ax.set_ylabel(plot.y_label)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="best", frameon=False)
    if plot.note:
        ax.annotate(
            plot.note, (0, 0), xycoords="axes fraction", xytext=(0, -30),
            textcoords="offset points", fontsize=6, color="#555555", va="top",
        )  # fmt: skip


def _load_axis(ax: Axes, loads: Sequence[float]) -> None:
    """Concurrency sweeps (1, 4, 16, 64) on a log-2 axis when they span 8x or more; ticks at
    the measured loads, thinned so no two labels print on top of each other."""
    from matplotlib.ticker import FixedLocator, NullLocator

    if not loads:
        return
    positive = [x for x in loads if x > 0]
    log = bool(positive) and max(positive) / min(positive) >= 8
    if log:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(NullLocator())
    ticks = thin_ticks(positive if log else list(loads), log=log)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.set_xticklabels([f"{x:g}" for x in ticks])


def thin_ticks(loads: Sequence[float], *, log: bool) -> list[float]:
    """The loads that keep a tick: from the lowest up, each at least `MIN_TICK_GAP` of the
    axis from the last kept one; the highest always kept (in place of a kept neighbour too
    close to it). Positions are log2 on a log axis."""
    ordered = sorted(set(loads))
    if len(ordered) < 3:
        return ordered

    def place(x: float) -> float:
        return math.log2(x) if log else x

    gap = MIN_TICK_GAP * (place(ordered[-1]) - place(ordered[0]))
    kept = [ordered[0]]
    for x in ordered[1:-1]:
        if place(x) - place(kept[-1]) >= gap:
            kept.append(x)
    while len(kept) > 1 and place(ordered[-1]) - place(kept[-1]) < gap:
        kept.pop()
    return [*kept, ordered[-1]]


def draw_pareto(ax: Axes, pareto: Pareto, palette: dict[str, str]) -> None:
    """Every level as a point, labelled `cell @load`; the front joined and ringed. With many
    points only the front's are labelled and a legend gives each cell's colour."""
    from matplotlib.lines import Line2D

    points = pareto.points
    ax.scatter(
        [p.per_gpu for p in points],
        [p.per_user for p in points],
        c=[palette.get(p.cell, PALETTE[0]) for p in points],
        s=28,
        zorder=3,
        gid="pareto-points",
    )
    front = pareto.front
    ax.plot(
        [p.per_gpu for p in front],
        [p.per_user for p in front],
        color=FRONT_COLOR,
        linewidth=1.5,
        marker="o",
        markersize=9,
        markerfacecolor="none",
        label="Pareto front",
        gid="pareto-front",
        zorder=2,
    )
    right = _headroom(max(p.per_gpu for p in points), 1.3)
    offsets = label_offsets(points) if len(points) <= LABEL_ALL_UP_TO else None
    label_all = offsets is not None
    labelled = list(points) if label_all else list(front)
    if offsets is None:
        offsets = label_offsets(labelled) or [LABEL_OFFSETS[0]] * len(labelled)
    for point, offset in zip(labelled, offsets, strict=True):
        # Points far right take their label on their left, so it stays inside the axes;
        # whatever would still cross the axes' edge is clipped, never printed over a title.
        on_left = point.per_gpu > RIGHT_ALIGN_FROM * right
        ax.annotate(
            point.label,
            (point.per_gpu, point.per_user),
            xytext=(-6 if on_left else 4, offset),
            textcoords="offset points",
            ha="right" if on_left else "left",
            fontsize=7,
            fontweight="bold" if point.on_front else "normal",
            color="#222222" if point.on_front else "#666666",
            clip_on=True,
        )
    ax.set_title(Pareto.title)
    ax.set_xlabel(PER_GPU)
    ax.set_ylabel("tokens/s per user")
    ax.set_xlim(left=0, right=right)
    ax.set_ylim(bottom=0, top=_headroom(max(p.per_user for p in points)))
    handles, _ = ax.get_legend_handles_labels()
    if not label_all:
        cells = dict.fromkeys(p.cell for p in points)
        handles += [
            Line2D([], [], marker="o", linestyle="", color=palette.get(c, PALETTE[0]), label=c)
            for c in cells
        ]
    ax.legend(handles=handles, fontsize=7, loc="upper right", frameon=False)
    note = PER_USER
    if pareto.left_out:
        note += f"; not placed (GPU count unknown): {', '.join(pareto.left_out)}"
    ax.annotate(
        note, (0, 0), xycoords="axes fraction", xytext=(0, -30),
        textcoords="offset points", fontsize=6, color="#555555", va="top",
    )  # fmt: skip


def label_offsets(points: Sequence[ParetoPoint]) -> list[int] | None:
    """A vertical offset (points) per label, the first of `LABEL_OFFSETS` that no earlier
    label near it holds (a label is about a third of the plot wide and a sixteenth high);
    None when some label finds none free: too crowded to label every point."""
    span_x = max((p.per_gpu for p in points), default=1.0) or 1.0
    span_y = max((p.per_user for p in points), default=1.0) or 1.0
    placed: list[tuple[ParetoPoint, int]] = []
    for point in points:
        taken = [
            used
            for other, used in placed
            if abs(other.per_gpu - point.per_gpu) < 0.3 * span_x
            and abs(other.per_user - point.per_user) < 0.06 * span_y
        ]
        free = [o for o in LABEL_OFFSETS if all(abs(o - used) >= 10 for used in taken)]
        if not free:
            return None
        placed.append((point, free[0]))
    return [offset for _, offset in placed]


def _headroom(top: float, factor: float = 1.18) -> float:
    """Room beyond the largest value for its label."""
    return top * factor if top > 0 and math.isfinite(top) else 1.0


def _panels(plots: RunPlots) -> list[Plot | Pareto]:
    panels: list[Plot | Pareto] = list(plots.plots)
    if plots.pareto is not None:
        panels.append(plots.pareto)
    return panels


def _draw(ax: Axes, panel: Plot | Pareto, palette: dict[str, str]) -> None:
    if isinstance(panel, Pareto):
        draw_pareto(ax, panel, palette)
    else:
        draw_plot(ax, panel, palette)


def figures(plots: RunPlots) -> list[tuple[str, Figure]]:
    """(file stem, figure) per plot, the Pareto plot last."""
    _pyplot_free()
    from matplotlib.figure import Figure

    palette = colors(plots)
    out: list[tuple[str, Figure]] = []
    for panel in _panels(plots):
        figure = Figure(figsize=(7.5, 4.6), layout="constrained")
        _draw(figure.add_subplot(), panel, palette)
        out.append(("pareto" if isinstance(panel, Pareto) else panel.key, figure))
    return out


def overview(plots: RunPlots) -> Figure:
    """Every plot on one page, two across, the run named on top."""
    _pyplot_free()
    from matplotlib.figure import Figure

    panels = _panels(plots)
    rows = max(1, math.ceil(len(panels) / 2))
    figure = Figure(figsize=(14, 4.8 * rows), layout="constrained")
    title = f"{plots.run_id}" + (f": {plots.name}" if plots.name else "")
    if plots.slo:
        title += f"  (SLO {plots.slo})"
    figure.suptitle(title, fontsize=12, fontweight="bold")
    palette = colors(plots)
    for index, panel in enumerate(panels):
        _draw(figure.add_subplot(rows, 2, index + 1), panel, palette)
    return figure


def svg_text(figure: Figure, salt: str) -> str:
    """The figure as SVG text; `salt` keeps its element ids apart from another figure's
    (several are inlined in one HTML page) and stable from one report to the next."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


def png_bytes(figure: Figure, dpi: int = 110) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()
