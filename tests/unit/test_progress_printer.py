"""The CLI's progress printer: plain lines at most every ten seconds inside a level, a bar
redrawn in place on a terminal and cleared before any other line."""

from __future__ import annotations

import io

from console.bench.listing import LevelProgress, Progress
from console.cli.progress_line import CLEAR, ProgressPrinter, eta_text


def live(completed: int, total: int | None = 16, *, index: int = 0) -> Progress:
    level = LevelProgress(
        index=index,
        of=3,
        concurrency=4,
        rate=None,
        completed=completed,
        total=total,
        errors=1 if completed > 2 else 0,
        output_tok_s=123.44 if completed else None,
        elapsed_s=5.0,
        eta_s=75.0 if completed else None,
    )
    return Progress(cell="qwen/tp1/off", level=index, done=completed, planned=16, live=level)


def test_plain_lines_come_at_most_every_ten_seconds_inside_a_level() -> None:
    clock = [1000.0]
    out = io.StringIO()
    printer = ProgressPrinter(out, tty=False, clock=lambda: clock[0])
    printer.progress(live(0))
    clock[0] += 4
    printer.progress(live(3))  # 4 s into the level: nothing yet
    assert out.getvalue() == ""
    clock[0] += 6
    printer.progress(live(5))
    clock[0] += 5
    printer.progress(live(8))  # 5 s after the last line: nothing
    lines = out.getvalue().splitlines()
    assert lines == [
        "qwen/tp1/off: level 1 of 3 (concurrency 4): 5/16 requests, 1 error, 123.4 tok/s, ETA 1:15"
    ]
    printer.event("qwen/tp1/off: level 1 done: ...")
    clock[0] += 1
    printer.progress(live(1, index=1))  # a new level starts its own ten seconds
    clock[0] += 9
    printer.progress(live(2, index=1))
    assert out.getvalue().splitlines()[-1] == "qwen/tp1/off: level 1 done: ..."


def test_the_bar_is_cleared_before_an_event_and_at_the_end() -> None:
    out = io.StringIO()
    printer = ProgressPrinter(out, tty=True)
    printer.progress(live(8, total=None))
    printer.event("a line")
    printer.close()
    text = out.getvalue()
    assert text.startswith(CLEAR + "L1/3 concurrency 4: 8 requests, 1 error, 123.4 tok/s")
    assert text.endswith(CLEAR + "a line\n")
    assert [eta_text(s) for s in (None, 42.4, 65, 3725)] == [
        "ETA ?",
        "ETA 42 s",
        "ETA 1:05",
        "ETA 1:02:05",
    ]
