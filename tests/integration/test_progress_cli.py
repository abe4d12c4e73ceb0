"""A foreground `bench` shows its running level: a redrawn progress line on a terminal
(done/total, tok/s, ETA), plain lines otherwise, and `--json` output unchanged. A real
simulator on a free port; the terminal is a real pseudo-terminal."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli.progress_line import CLEAR
from tests.conftest import REPO
from tests.ptyrun import run_on_pty
from tests.simproc import SMALL, running_sim

BENCH = ["--concurrency", "1,2", "--requests", "6", "--input-len", "32", "--output-len", "96"]


def on_terminal(args: list[str]) -> tuple[int, str]:
    """`ddconsole ARGS` with a pseudo-terminal as stdin and stdout; its status and output."""
    return run_on_pty(args, timeout=180, env={"COLUMNS": "160"})


@pytest.mark.slow
def test_a_terminal_gets_a_progress_bar_and_a_pipe_plain_lines(tmp_path: Path) -> None:
    with running_sim(SMALL, tmp_path, speed=4) as sim:
        code, shown = on_terminal(
            ["--demo", "bench", "--url", sim.url, *BENCH, "--out", str(tmp_path / "a")]
        )
        assert code == 0, shown[-2000:]
        # The bar is redrawn in place: the level, requests done of 6, tok/s and an ETA.
        bars = [part for part in shown.split(CLEAR) if part.startswith("[")]
        assert bars, shown[-2000:]
        assert any("L1/2 concurrency 1: " in bar and "/6 requests" in bar for bar in bars)
        assert any("L2/2 concurrency 2: " in bar for bar in bars)
        assert any(" tok/s, ETA " in bar and "- tok/s" not in bar for bar in bars)
        # Taken away before the next line: the level's end line starts where the bar was.
        assert re.search(r"\x1b\[K[^\r\n]*: level 1 done: ", shown), shown[-2000:]
        assert "level 2 done" in shown

        argv = ["--demo", "bench", "--url", sim.url, *BENCH, "--out", str(tmp_path / "b")]
        piped = subprocess.run(
            [sys.executable, "-m", "console", *argv, "--json"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=180,
            check=False,
        )
    assert piped.returncode == 0, piped.stderr[-2000:]
    assert "\r" not in piped.stdout + piped.stderr
    assert "\x1b[" not in piped.stdout + piped.stderr
    # stdout stays one JSON document; the progress went to stderr.
    summary = json.loads(piped.stdout)
    assert [lv["requests"] for lv in summary["cells"][0]["levels"]] == [6, 6]
    assert "level 2 done" in piped.stderr
