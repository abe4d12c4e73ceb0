"""Chart strips decode plotext's ANSI text exactly as Rich does, cell for cell."""

from __future__ import annotations

import math

import plotext
from rich.console import Console
from rich.style import Style
from rich.text import Text

from console.tui.widgets.ansi import AnsiStrips

BASE = Style(color="#e0e0e0", bgcolor="#1e1e1e")


def rich_cells(ansi: str) -> list[list[tuple[str, Style]]]:
    console = Console(width=200)
    rows = []
    for line in Text.from_ansi(ansi).split("\n"):
        rows.append(
            [
                (char, BASE + line.get_style_at_offset(console, x))
                for x, char in enumerate(line.plain)
            ]
        )
    return rows


def strip_cells(ansi: str, width: int) -> list[list[tuple[str, Style]]]:
    rows = []
    for strip in AnsiStrips().strips(ansi, width, BASE):
        rows.append(
            [(char, segment.style or Style()) for segment in strip for char in segment.text]
        )
    return rows


def test_runs_of_colour_and_bold_decode_like_rich():
    ansi = (
        "\x1b[48;2;30;30;30m\x1b[38;5;6m\x1b[1mtok/s\x1b[0m plain \x1b[38;2;244;0;95m▞▞\x1b[0m\n"
        "\x1b[38;5;6m\x1b[1mtok/s\x1b[0m\x1b[38;5;196mx\x1b[0m\n"
    )
    expected = rich_cells(ansi)
    got = strip_cells(ansi, 20)
    assert [row[: len(want)] for row, want in zip(got, expected, strict=True)] == expected
    # Padded to the width with the base style; the styles decoded once per sequence.
    assert all(len(row) == 20 for row in got)
    assert got[0][-1] == (" ", BASE)


def test_a_plotext_chart_decodes_like_rich():
    plot = plotext
    plot.clear_figure()
    xs = list(range(-300, 1))
    plot.plot(xs, [100 + 50 * math.sin(x / 10) for x in xs], label="tok/s", color="cyan")
    plot.plot(xs, [60 + 20 * math.cos(x / 7) for x in xs], label="p99", color="magenta")
    plot.title("output (tok/s)")
    plot.plotsize(40, 12)
    plot.theme("dark")
    ansi = plot.build()
    expected = rich_cells(ansi)
    got = strip_cells(ansi, 40)
    assert len(got) == 12
    assert [row[: len(want)] for row, want in zip(got, expected, strict=False)] == expected[:12]
    assert any(style.color is not None and style.color != BASE.color for _, style in got[3])
