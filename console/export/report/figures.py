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
LABEL_ALL_UP_TO = 16
"""A Pareto plot with more points labels only its front's (a legend names the cells)."""


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
    the measured loads either way."""
    from matplotlib.ticker import FixedLocator, NullLocator

    if not loads:
        return
    positive = [x for x in loads if x > 0]
    if positive and max(positive) / min(positive) >= 8:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_locator(FixedLocator(list(loads)))
    ax.set_xticklabels([f"{x:g}" for x in loads])


def draw_pareto(ax: Axes, pareto: Pareto, palette: dict[str, str]) -> None:
    """Every level as a point, labelled `cell @load`; the front joined and ringed. With many
    points only the front's are labelled and a legend gives each cell's colour."""
    from matplotlib.lines import Line2D

    points = pareto.points
    label_all = len(points) <= LABEL_ALL_UP_TO
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
    labelled = [p for p in points if label_all or p.on_front]
    for point, offset in zip(labelled, _label_offsets(labelled), strict=True):
        ax.annotate(
            point.label,
            (point.per_gpu, point.per_user),
            xytext=(4, offset),
            textcoords="offset points",
            fontsize=7,
            fontweight="bold" if point.on_front else "normal",
            color="#222222" if point.on_front else "#666666",
        )
    ax.set_title(Pareto.title)
    ax.set_xlabel(PER_GPU)
    ax.set_ylabel("tokens/s per user")
    ax.set_xlim(left=0, right=_headroom(max(p.per_gpu for p in points), 1.3))
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


def _label_offsets(points: Sequence[ParetoPoint]) -> list[int]:
    """A vertical offset (points) per label: a label whose point sits close to an earlier
    one's (a label is about a third of the plot wide and a sixteenth high) goes a line
    below it, so neither hides the other."""
    span_x = max((p.per_gpu for p in points), default=1.0) or 1.0
    span_y = max((p.per_user for p in points), default=1.0) or 1.0
    placed: list[tuple[ParetoPoint, int]] = []
    offsets = []
    for point in points:
        offset = 4
        for other, used in placed:
            near = (
                abs(other.per_gpu - point.per_gpu) < 0.3 * span_x
                and abs(other.per_user - point.per_user) < 0.06 * span_y
            )
            if near and used >= offset - 9:
                offset = used - 10
        placed.append((point, offset))
        offsets.append(offset)
    return offsets


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
