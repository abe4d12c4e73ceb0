"""What the TUI costs, as a user's terminal sees it: the app runs in a real pseudo-terminal.

Setup: the demo host (8 simulated GPUs) with 2 simulator servers under a light detached
benchmark load, in a private state dir. The app is `ddconsole --demo` in a pty; a reader
thread drains the terminal and timestamps what arrives.

- first frame: spawn -> the dashboard's GPU table is on the terminal;
- observer cost: the app's CPU time / wall time over the measurement window on the idle
  dashboard at the default 1 s refresh, and the bytes it wrote to the terminal per second
  (120x40);
- key latency while a source hangs: a third server is started with the simulator's `hang`
  fault (it stops answering, its metrics and readiness probes time out); keys switching
  between Topology and Dashboard are pressed and the time until the new screen's title
  reaches the terminal is measured.

    python bench/tui.py [--seconds 60] [--no-write]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import signal
import statistics
import struct
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    cpu_seconds,
    ddconsole,
    start_demo_load,
    stop_demo_load,
    update_results,
)

COLS, ROWS = 120, 40
# On a GPU host the servers' work is on the GPUs; here the simulators and their load
# generators burn CPU in its place, so they get their own cores and the console the first.
_ALL_CPUS = sorted(os.sched_getaffinity(0))
CONSOLE_CPUS = set(_ALL_CPUS[:1]) if len(_ALL_CPUS) > 1 else set()
LOAD_CPUS = set(_ALL_CPUS[1:]) if len(_ALL_CPUS) > 1 else set()


def pin_to_load_cpus() -> None:
    if LOAD_CPUS:
        os.sched_setaffinity(0, LOAD_CPUS)


class Terminal:
    """A pty running the console; everything it writes is kept with arrival times."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.started = time.monotonic()
        pid, fd = pty.fork()
        if pid == 0:
            if CONSOLE_CPUS:
                os.sched_setaffinity(0, CONSOLE_CPUS)
            os.execvpe(argv[0], argv, env)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.chunks: list[tuple[float, bytes]] = []
        self.lock = threading.Lock()
        self.total = 0
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.chunks.append((time.monotonic(), data))
                self.total += len(data)

    def wait_for(self, marker: bytes, since: float, timeout: float) -> float | None:
        """The arrival time of the first chunk after `since` that completes `marker`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                recent = [(t, c) for t, c in self.chunks if t >= since]
            joined = b""
            for t, chunk in recent:
                joined += chunk
                if marker in joined:
                    return t
            time.sleep(0.002)
        return None

    def press(self, key: str) -> float:
        at = time.monotonic()
        os.write(self.fd, key.encode())
        return at

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ddconsole-bench-tui-")
    env = dict(os.environ, XDG_STATE_HOME=work, XDG_CONFIG_HOME=work, TERM="xterm-256color")
    load_pids: list[int] = []
    term = None
    try:
        start_demo_load(env, (30001, 30002), load_pids, preexec=pin_to_load_cpus)
        term = Terminal([sys.executable, "-m", "console", "--demo"], env)
        first = term.wait_for(b"NUMA 1", term.started, 20)
        first_frame = None if first is None else first - term.started
        time.sleep(10)  # warm: every source has reported, charts have history

        cpu0, bytes0, t0 = cpu_seconds(term.pid), term.total, time.monotonic()
        time.sleep(args.seconds)
        cpu1, bytes1, t1 = cpu_seconds(term.pid), term.total, time.monotonic()

        cost_pct = 100 * (cpu1 - cpu0) / (t1 - t0)
        bytes_s = (bytes1 - bytes0) / (t1 - t0)

        hang_env = dict(env, DDCONSOLE_SIM_FAULT="hang:1")
        ddconsole(
            hang_env,
            *("up", "qwen3.6-27b", "--layout", "tp1", "--variant", "off"),
            *("--gpus", "2", "--port", "30003"),
            preexec=pin_to_load_cpus,
        )
        time.sleep(4)  # the hang started; its probes and metrics now time out
        latencies = []
        for index in range(20):
            key, marker = ("t", b"Topology") if index % 2 == 0 else ("d", b"Dashboard")
            pressed = term.press(key)
            seen = term.wait_for(marker, pressed, 5)
            latencies.append(float("inf") if seen is None else seen - pressed)
            time.sleep(0.6)
    finally:
        if term is not None:
            term.close()
        stop_demo_load(env, load_pids)

    p50 = statistics.median(latencies) * 1000
    worst = max(latencies) * 1000
    first_text = "not seen" if first_frame is None else f"{first_frame:.2f} s"
    rows = [
        ("time to first frame (spawn -> GPU table on the terminal)", first_text, "<= 1.5 s"),
        (
            f"observer cost, CPU time / wall time over {args.seconds:.0f} s",
            f"{cost_pct:.2f}% of one core",
            "<= 3%",
        ),
        (
            f"bytes written to the terminal, dashboard at {COLS}x{ROWS}",
            f"{bytes_s / 1024:.1f} KiB/s",
            "report",
        ),
        (
            "key -> new screen on the terminal while a server hangs (20 presses)",
            f"p50 {p50:.0f} ms, max {worst:.0f} ms",
            "<= 100 ms",
        ),
    ]
    body = (
        f"`python bench/tui.py`: `ddconsole --demo` in a real pty at {COLS}x{ROWS}, 8 simulated\n"
        "GPUs, 2 simulator servers (Qwen3.6-27B tp1 ddtree-b15) each under a detached 2-stream\n"
        f"benchmark, default 1 s refresh, dashboard shown. {os.cpu_count()} CPUs"
        + (
            f"; the console on CPU {sorted(CONSOLE_CPUS)}, the simulators and load generators "
            f"(standing in for GPU work) on {sorted(LOAD_CPUS)}"
            if CONSOLE_CPUS
            else ""
        )
        + ".\n\n"
        "| what | measured | budget |\n| --- | --- | --- |\n"
        + "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
        + "\n"
    )
    print(body)
    if not args.no_write:
        update_results("TUI", body)


if __name__ == "__main__":
    main()
