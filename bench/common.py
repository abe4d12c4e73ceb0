"""Helpers shared by the benchmark scripts: CPU time of a process, results file updates,
the demo servers and load they measure against."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
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


def ddconsole(
    env: dict[str, str], *args: str, preexec: Callable[[], None] | None = None
) -> dict[str, object]:
    """Run `ddconsole --demo ARGS --json`; exit with its error message if it fails."""
    out = subprocess.run(
        [sys.executable, "-m", "console", "--demo", *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        preexec_fn=preexec,
    )
    if out.returncode != 0:
        sys.exit(f"ddconsole {' '.join(args)} failed: {out.stderr.strip()}")
    return json.loads(out.stdout) if out.stdout.strip() else {}


def start_demo_load(
    env: dict[str, str],
    ports: tuple[int, int],
    load_pids: list[int],
    preexec: Callable[[], None] | None = None,
) -> list[str]:
    """Two Qwen3.6-27B tp1 ddtree-b15 servers (GPUs 0 and 4), each under a detached
    2-stream benchmark whose process group goes in `load_pids`; returns the server ids."""
    servers = []
    for gpu, port in zip((0, 4), ports, strict=True):
        up = ddconsole(
            env,
            *("up", "qwen3.6-27b", "--layout", "tp1", "--variant", "ddtree-b15"),
            *("--gpus", str(gpu), "--port", str(port)),
            preexec=preexec,
        )
        servers.append(str(up["id"]))
    for server in servers:
        run = ddconsole(
            env,
            *("bench", "--server", server, "--concurrency", "2", "--requests", "100000"),
            *("--output-len", "64", "--detach"),
            preexec=preexec,
        )
        load_pids.append(int(str(run.get("pid") or 0)))
    return servers


def stop_demo_load(env: dict[str, str], load_pids: list[int]) -> None:
    """Stop the detached benchmarks, then every demo server of this state dir."""
    for pid in load_pids:
        if pid:
            try:
                os.killpg(pid, signal.SIGTERM)
            except OSError:
                pass
    subprocess.run(
        [sys.executable, "-m", "console", "--demo", "down", "--all"],
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
