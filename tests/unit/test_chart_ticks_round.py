"""Chart y-axis ticks land on round values (1-2-5 steps) and carry short units."""

from __future__ import annotations

import itertools
import math

import pytest

from console.tui.widgets.chart import Line, finite, nice_step, points, tick_label, y_ticks


@pytest.mark.parametrize(
    ("top", "ticks"),
    [
        (175.6, [0, 50, 100, 150, 200]),
        (146.3, [0, 50, 100, 150]),
        (0.37, [0, 0.1, 0.2, 0.3, 0.4]),
        (14.8, [0, 5, 10, 15]),
        (0.0, [0, 1]),
        (3000, [0, 1000, 2000, 3000]),
    ],
)
def test_ticks_are_round_and_cover_the_top(top: float, ticks: list[float]) -> None:
    assert y_ticks(top) == pytest.approx(ticks)


@pytest.mark.parametrize("top", [0.004, 0.37, 1.7, 26.6, 146.3, 175.6, 807.5, 12345.0])
def test_every_step_is_one_two_or_five_times_a_power_of_ten(top: float) -> None:
    ticks = y_ticks(top)
    step = ticks[1] - ticks[0]
    mantissa = step / 10 ** int(f"{step:e}".split("e")[1])
    assert round(mantissa, 6) in (1.0, 2.0, 5.0)
    assert ticks[-1] >= top
    assert ticks[-2] < top or top == 0
    assert 2 <= len(ticks) <= 6


def test_counts_never_get_fractional_ticks() -> None:
    assert nice_step(0.37, 4, whole=True) == 1.0
    assert y_ticks(0.37, whole=True) == [0, 1]
    assert y_ticks(7, whole=True) == [0, 2, 4, 6, 8]


def test_labels_have_the_decimals_the_step_needs_and_short_units() -> None:
    assert [tick_label(t, 50, "") for t in (0, 50, 150)] == ["0", "50", "150"]
    assert tick_label(0.25, 0.05, "") == "0.25"
    assert tick_label(1500, 500, "tok/s") == "1.5k"
    assert tick_label(50, 10, "ms") == "50ms"
    assert tick_label(1500, 500, "ms") == "1500ms"
    assert tick_label(100, 50, "%") == "100%"


async def test_the_dashboards_charts_label_round_ticks() -> None:
    import re

    from console.tui.app import ConsoleApp
    from console.tui.widgets.chart import TimeChart
    from tests.tui import scene
    from tests.tui.conftest import settle

    app = ConsoleApp(scene.backend(), mode="dashboard")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        for chart_id, unit in (("tok", ""), ("ttft", "ms"), ("queue", "")):
            chart = app.screen.query_one(f"#chart-{chart_id}", TimeChart)
            labels = re.findall(r"^\s*([0-9.]+k?)" + unit + r"┤", chart.plain, re.MULTILINE)
            assert len(labels) >= 2, chart.plain
            values = [float(v.rstrip("k")) * (1000 if v.endswith("k") else 1) for v in labels]
            steps = {round(a - b, 6) for a, b in itertools.pairwise(values)}
            assert len(steps) == 1, labels
            step = steps.pop()
            assert step / 10 ** int(f"{step:e}".split("e")[1]) in (1.0, 2.0, 5.0), labels
            if chart_id == "queue":
                assert all(v == int(v) for v in values), labels


@pytest.mark.parametrize("top", [math.inf, -math.inf, math.nan, 1e-12, 0.0, -5.0])
def test_a_top_that_is_not_finite_or_hardly_above_the_floor_gives_two_ticks(top: float) -> None:
    ticks = y_ticks(top)
    assert ticks == [0.0, 1.0]
    step = ticks[1] - ticks[0]
    assert [tick_label(t, step, "ms") for t in ticks] == ["0ms", "1ms"]


def test_a_floor_that_is_not_finite_is_read_as_zero() -> None:
    assert y_ticks(math.nan, floor=math.nan) == [0.0, 1.0]
    assert y_ticks(150.0, floor=math.inf) == y_ticks(150.0)


def test_labels_of_a_zero_or_nan_step_have_no_decimals() -> None:
    assert tick_label(0.0, 0.0, "") == "0"
    assert tick_label(2.0, math.nan, "%") == "2%"
    assert tick_label(1500.0, 0.0, "tok/s") == "2k"


def test_a_chart_drops_readings_that_are_not_finite() -> None:
    """An inf and a NaN among finite readings: the chart draws the finite ones, and its
    axis and latest value come from them."""
    from console.telemetry.store import TimeSeriesStore

    store = TimeSeriesStore()
    for t, value in ((1.0, 5.0), (2.0, math.inf), (3.0, 7.0), (4.0, math.nan)):
        store.append("s", t, value)
    xs, ys = points(store, Line(("s",), "s"), 0.0, 4.0)
    assert math.inf in ys  # the store keeps an inf; the chart leaves it out
    assert finite(xs, ys) == ([-3.0, -1.0], [5.0, 7.0])
    assert finite([1.0, 2.0], [math.nan, -math.inf]) == ([], [])
