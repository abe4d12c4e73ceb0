"""A time chart on the shared axis: seconds before `now`, one line per series (plotext).

Series are thinned to one point per column before plotting (plotext joins them with lines;
its cost grows with the points it draws). The built plot is kept as strips until the next
`draw` or resize, so showing a screen again costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.strip import Strip
from textual_plotext import PlotextPlot

from console.telemetry.store import TimeSeriesStore
from console.tui.widgets.ansi import AnsiStrips

COLORS = ("cyan", "magenta", "green", "orange", "blue", "red")


@dataclass(frozen=True)
class Line:
    """One plotted line: a store key (or keys, averaged per instant), label and scale."""

    keys: tuple[str, ...]
    label: str
    scale: float = 1.0


def points(
    store: TimeSeriesStore, line: Line, since: float, now: float
) -> tuple[list[float], list[float]]:
    """(seconds before now, value) of a line; several keys are averaged at each instant."""
    sums: dict[float, list[float]] = {}
    for key in line.keys:
        window = store.window(key, since)
        for t, v in zip(window.times, window.values, strict=True):
            if v is not None and t <= now:
                # Samples of one poll share an instant to the millisecond.
                sums.setdefault(round(t, 3), []).append(v)
    ordered = sorted(sums.items())
    return (
        [t - now for t, _ in ordered],
        [sum(vs) / len(vs) * line.scale for _, vs in ordered],
    )


def thin(xs: list[float], ys: list[float], buckets: int) -> tuple[list[float], list[float]]:
    """At most `buckets` points: the last point of each equal slice keeps the newest value."""
    if len(xs) <= buckets or buckets < 2:
        return xs, ys
    step = len(xs) / buckets
    picks = sorted({min(len(xs) - 1, int((i + 1) * step) - 1) for i in range(buckets)})
    return [xs[i] for i in picks], [ys[i] for i in picks]


class TimeChart(PlotextPlot):
    DEFAULT_CSS = """
    TimeChart { height: 1fr; min-height: 7; width: 1fr; }
    """

    def __init__(self, title: str, unit: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title = title
        self.unit = unit
        self.latest: dict[str, float] = {}
        """The newest value of each line (what the chart ends at), for tests and the title."""
        self.draws = 0
        self._built: tuple[tuple[int, int, int, str], list[Strip]] | None = None
        self._ansi = AnsiStrips()

    @property
    def plain(self) -> str:
        """The chart as shown, without colour (for tests)."""
        return "\n".join(strip.text for strip in self._strips())

    def render_line(self, y: int) -> Strip:
        strips = self._strips()
        if 0 <= y < len(strips):
            return strips[y]
        return Strip.blank(self.size.width, self.rich_style)

    def _strips(self) -> list[Strip]:
        key = (self.draws, self.size.width, self.size.height, str(self.app.theme))
        if self._built is None or self._built[0] != key:
            strips = self._ansi.strips(self._canvas(), self.size.width, self.rich_style)
            self._built = (key, strips)
        return self._built[1]

    def _canvas(self) -> str:
        """The plot as plotext's ANSI text, sized and themed as `PlotextPlot.render` does."""
        plot = self.plt
        plot.plotsize(self.size.width, self.size.height)
        plot._set_size(self.size.width, self.size.height)
        plot.theme(self._get_plotext_theme_name(self.app.theme))
        return str(plot.build())

    def draw(
        self,
        store: TimeSeriesStore,
        lines: list[Line],
        now: float,
        window_s: float,
        *,
        y_floor: float | None = 0.0,
        unplotted: dict[str, str] | None = None,
        empty_note: str | None = None,
    ) -> None:
        """`unplotted`: a value by line label for lines that have one but no points (a
        latency percentile its histogram bucket does not resolve), shown in the title;
        `empty_note`: what the chart says when no line has points (default `no data`)."""
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        buckets = max(8, self.size.width)
        drawn = 0
        self.latest = {}
        top = 0.0
        for index, line in enumerate(lines):
            xs, ys = points(store, line, now - window_s, now)
            if not xs:
                continue
            xs, ys = thin(xs, ys, buckets)
            plt.plot(xs, ys, label=line.label, color=COLORS[index % len(COLORS)], marker="hd")
            self.latest[line.label] = ys[-1]
            top = max(top, max(ys))
            drawn += 1
        title = f"{self.title} ({self.unit})" if self.unit else self.title
        shown = {k: _short(v) for k, v in self.latest.items()}
        shown.update({k: v for k, v in (unplotted or {}).items() if k not in shown})
        if shown and self.size.width >= 40:
            title += "  " + "  ".join(f"{k} {v}" for k, v in shown.items())
        plt.title(title)
        plt.xlim(-window_s, 0)
        if drawn == 0:
            plt.ylim(0, 1)
            plt.yticks([])
            plt.text(empty_note or "no data", x=-window_s / 2, y=0.5, alignment="center")
        elif y_floor is not None:
            plt.ylim(y_floor, top * 1.1 if top > y_floor else y_floor + 1)
        if self.size.height >= 10:
            plt.xlabel("seconds ago")
        self.draws += 1
        self.refresh()


def _short(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"
