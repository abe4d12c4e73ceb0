"""A time chart on the shared axis: seconds before `now`, one line per series (plotext).

Series are thinned to one point per column before plotting (plotext joins them with lines;
its cost grows with the points it draws). The built plot is kept as strips until the next
`draw` or resize, so showing a screen again costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from textual.strip import Strip
from textual_plotext import PlotextPlot

from console.telemetry.store import TimeSeriesStore
from console.tui.widgets.ansi import AnsiStrips

COLORS = ("cyan", "magenta", "green", "orange", "blue", "red")
STEPS = (1.0, 2.0, 5.0, 10.0)
"""Tick steps are one of these times a power of ten (1-2-5), as on a ruler."""
UNIT_ON_TICKS = ("ms", "%", "s")
"""Units short enough to print on every tick; longer ones stay in the chart's title."""


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


def finite(xs: list[float], ys: list[float]) -> tuple[list[float], list[float]]:
    """The points whose value is a finite number: an inf or NaN reading (a rate over a zero
    interval) has no place on the axis and would break its ticks."""
    kept = [(x, y) for x, y in zip(xs, ys, strict=True) if math.isfinite(y)]
    return [x for x, _ in kept], [y for _, y in kept]


def thin(xs: list[float], ys: list[float], buckets: int) -> tuple[list[float], list[float]]:
    """At most `buckets` points: the last point of each equal slice keeps the newest value."""
    if len(xs) <= buckets or buckets < 2:
        return xs, ys
    step = len(xs) / buckets
    picks = sorted({min(len(xs) - 1, int((i + 1) * step) - 1) for i in range(buckets)})
    return [xs[i] for i in picks], [ys[i] for i in picks]


def nice_step(span: float, count: int, *, whole: bool = False) -> float:
    """The 1-2-5 step that cuts `span` into at most `count` intervals (1 or more when the
    values are counts)."""
    raw = span / max(1, count) if span > 0 else 1.0
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in STEPS if m * magnitude >= raw * (1 - 1e-9))
    return max(step, 1.0) if whole else step


MIN_SPAN = 1e-9
"""Below this span the ticks would round (to 10 decimals) onto one value: one unit is shown."""


def y_ticks(top: float, *, floor: float = 0.0, count: int = 4, whole: bool = False) -> list[float]:
    """Round tick values from `floor` to the first step at or above `top`. A top that is
    not finite (inf, NaN) or hardly above the floor gives `[floor, floor + 1]`: two
    distinct ticks, never an error."""
    if not math.isfinite(floor):
        floor = 0.0
    if not math.isfinite(top) or top - floor < MIN_SPAN:
        return [floor, floor + 1.0]
    step = nice_step(top - floor, count, whole=whole)
    first = math.floor(floor / step) * step
    intervals = max(1, math.ceil((top - first) / step - 1e-9))
    return [round(first + i * step, 10) for i in range(intervals + 1)]


def tick_label(value: float, step: float, unit: str) -> str:
    """`150`, `1.5k`, `0.25`, `50ms`, `100%`: as many decimals as the step needs."""
    if abs(value) >= 1000 and unit not in UNIT_ON_TICKS:
        text = f"{value / 1000:.{_decimals(step / 1000)}f}k"
    else:
        text = f"{value:.{_decimals(step)}f}"
    return text + unit if unit in UNIT_ON_TICKS else text


def _decimals(step: float) -> int:
    """Decimals a step needs; none for a step that is not a positive finite number (two
    equal ticks, NaN), which has no magnitude to read."""
    if not math.isfinite(step) or step <= 0:
        return 0
    return 0 if step >= 1 else min(6, math.ceil(-math.log10(step) - 1e-9))


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
            xs, ys = finite(xs, ys)
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
            rows = max(2, self.size.height - 4)
            whole = not self.unit  # a count (requests): no fractional ticks
            ticks = y_ticks(max(top, y_floor), floor=y_floor, count=min(5, rows // 2), whole=whole)
            step = ticks[1] - ticks[0]
            plt.ylim(ticks[0], ticks[-1])
            plt.yticks(ticks, [tick_label(t, step, self.unit) for t in ticks])
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
