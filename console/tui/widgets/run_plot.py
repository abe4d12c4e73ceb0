"""One of a run's plots (`console.bench.plotdata`) drawn with plotext: a figure against load
with a line per cell, or the Pareto front of tokens/s per user against per GPU.

Load levels sit evenly spaced along the x axis, labelled with their values (a 1-4-16-64
sweep reads as on a log axis). A second percentile (p99) is drawn with dots beside the p50
line of the same colour. The built plot is kept as strips until the next `show` or resize.
"""

from __future__ import annotations

from textual.strip import Strip
from textual_plotext import PlotextPlot

from console.bench.plotdata import PER_USER, Pareto, Plot
from console.tui.widgets.ansi import AnsiStrips
from console.tui.widgets.chart import COLORS, tick_label, y_ticks

FRONT_COLOR = "red"
WIDE = 120
"""From this width every Pareto point is labelled; below it only the front's."""


class RunPlot(PlotextPlot):
    DEFAULT_CSS = """
    RunPlot { height: 1fr; min-height: 8; width: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.panel: Plot | Pareto | None = None
        self.draws = 0
        self._built: tuple[tuple[int, int, int, str], list[Strip]] | None = None
        self._ansi = AnsiStrips()

    @property
    def plain(self) -> str:
        """The plot as shown, without colour (for tests)."""
        return "\n".join(strip.text for strip in self._strips())

    def show(self, panel: Plot | Pareto | None) -> None:
        self.panel = panel
        self.draws += 1
        self.refresh()

    def render_line(self, y: int) -> Strip:
        strips = self._strips()
        if 0 <= y < len(strips):
            return strips[y]
        return Strip.blank(self.size.width, self.rich_style)

    def _strips(self) -> list[Strip]:
        key = (self.draws, self.size.width, self.size.height, str(self.app.theme))
        if self._built is None or self._built[0] != key:
            self._build()
            plot = self.plt
            plot.plotsize(self.size.width, self.size.height)
            plot._set_size(self.size.width, self.size.height)
            plot.theme(self._get_plotext_theme_name(self.app.theme))
            canvas = str(plot.build())
            self._built = (key, self._ansi.strips(canvas, self.size.width, self.rich_style))
        return self._built[1]

    def _build(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        panel = self.panel
        if panel is None:
            plt.title("nothing to plot")
        elif isinstance(panel, Pareto):
            self._pareto(panel)
        else:
            self._against_load(panel)

    def _against_load(self, plot: Plot) -> None:
        plt = self.plt
        loads = sorted({x for line in plot.lines for x in line.xs})
        position = {load: index for index, load in enumerate(loads)}
        cells: list[str] = []
        top = 0.0
        for line in plot.lines:
            cell = line.label.removesuffix(" p50").removesuffix(" p99")
            if cell not in cells:
                cells.append(cell)
            color = COLORS[cells.index(cell) % len(COLORS)]
            # The legend names each cell once; the title says the dotted line is its p99.
            plt.plot(
                [position[x] for x in line.xs],
                list(line.ys),
                label=None if line.dashed else cell,
                color=color,
                marker="dot" if line.dashed else "hd",
            )
            top = max(top, *line.ys)
        plt.title(plot.title.replace("solid, p99 dashed", "line, p99 dotted"))
        plt.xticks(list(range(len(loads))), [f"{x:g}" for x in loads])
        plt.xlim(-0.3, max(1, len(loads) - 1) + 0.3)
        self._y_axis(top, plot.y_label)
        if self.size.height >= 12:
            plt.xlabel(plot.x_label)

    def _y_axis(self, top: float, label: str) -> None:
        plt = self.plt
        rows = max(2, self.size.height - 5)
        ticks = y_ticks(top, count=min(5, rows // 2))
        step = ticks[1] - ticks[0]
        plt.ylim(ticks[0], ticks[-1])
        plt.yticks(ticks, [tick_label(t, step, "") for t in ticks])
        plt.ylabel(label)

    def _pareto(self, pareto: Pareto) -> None:
        plt = self.plt
        cells: list[str] = []
        for point in pareto.points:
            if point.cell not in cells:
                cells.append(point.cell)
        for index, cell in enumerate(cells):
            mine = [p for p in pareto.points if p.cell == cell]
            plt.scatter(
                [p.per_gpu for p in mine],
                [p.per_user for p in mine],
                label=cell,
                color=COLORS[index % len(COLORS)],
                marker="o",
            )
        front = pareto.front
        plt.plot(
            [p.per_gpu for p in front],
            [p.per_user for p in front],
            label="Pareto front",
            color=FRONT_COLOR,
            marker="hd",
        )
        # Room on the right for the labels of the fastest points; round ticks.
        across = y_ticks(max(p.per_gpu for p in pareto.points) * 1.25, count=5)
        wide = self.size.width >= WIDE
        # A label starts a little right of its point, so the point stays visible.
        nudge = (across[-1] - across[0]) * 4 / max(20, self.size.width)
        for point in pareto.points:
            if point.on_front or wide:
                plt.text(
                    point.label if wide else f"@{point.load}",
                    x=point.per_gpu + nudge,
                    y=point.per_user,
                    color=FRONT_COLOR if point.on_front else "gray",
                    alignment="left",
                )
        plt.xlim(across[0], across[-1])
        plt.xticks(across, [tick_label(t, across[1] - across[0], "") for t in across])
        top = max(p.per_user for p in pareto.points)
        self._y_axis(top * 1.1, "tok/s per user")
        plt.title("Pareto: tokens/s per user against per GPU (front in red)")
        if self.size.height >= 12:
            plt.xlabel("tok/s per GPU (output tok/s / GPUs)")


PARETO_NOTE = f"{PER_USER}; tokens/s per GPU = output tok/s / GPUs of the cell"
