"""Helpers shared by the benchmark scripts: CPU time of a process, results file updates."""

from __future__ import annotations

import os
import re
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (and its reaped children) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def update_results(section: str, body: str) -> None:
    """Replace (or append) the `## section` of bench/RESULTS.md with `body`."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks of ddconsole itself\n"
    block = f"## {section}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(section)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(block + "\n", text)
    else:
        text = text.rstrip() + "\n\n" + block
    RESULTS.write_text(text.rstrip() + "\n")
