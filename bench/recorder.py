"""What the flight recorder costs and whether its retention limit holds.

Setup: the demo host (8 simulated GPUs) and 2 managed simulator servers (Qwen3.6-27B tp1
ddtree-b15) each under a detached 2-stream benchmark, in a private state dir. A monitor
polls at the TUI's default 1 s with the session recorder attached, as `ddconsole` and
`ddconsole record` run it.

- size: compressed bytes on disk per minute of session (and uncompressed JSON, for scale);
- CPU: the event-loop thread's CPU time spent in the recorder (encoding, redaction,
  gzip, flushes) per source poll (5 a second here) and as a share of one core, beside
  the monitor's whole cost;
- retention: the same recorder with a small limit, polled every 20 ms so it rotates many
  times; the folder's size is checked after every poll and must never exceed the limit.

    python bench/recorder.py [--seconds 60] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import start_demo_load, stop_demo_load, update_results

RETENTION_LIMIT = 128 * 1024


async def measure_session(seconds: float) -> dict[str, float]:
    """Monitor + recorder at 1 s for `seconds`; CPU inside the recorder vs the whole loop."""
    from console.cli.services import Services
    from console.server.session_recorder import SessionRecorder

    services = Services.create(demo=True)
    monitor = services.monitor(interval_s=1.0)
    recorder = SessionRecorder(
        monitor, services.state.recordings, demo=True, topology=services.topology()
    )
    recorder.start()
    spent = [0.0, 0]
    on_poll = recorder._on_poll

    def timed(now: float, result: object) -> None:
        before = time.thread_time()
        on_poll(now, result)  # type: ignore[arg-type]
        spent[0] += time.thread_time() - before
        spent[1] += 1

    listeners = monitor.poller.listeners
    listeners[listeners.index(on_poll)] = timed
    await monitor.start()
    await asyncio.sleep(5)  # both servers' sources added, rates warmed up
    assert recorder.writer is not None
    bytes0, raw0 = recorder.writer.size_bytes, recorder.writer.bytes_in
    spent0, ticks0 = spent[0], spent[1]
    loop0, wall0 = time.thread_time(), time.monotonic()
    await asyncio.sleep(seconds)
    loop_cpu, wall = time.thread_time() - loop0, time.monotonic() - wall0
    recorder.writer.flush()
    size, raw = recorder.writer.size_bytes - bytes0, recorder.writer.bytes_in - raw0
    series = monitor.store.series_count()
    await monitor.stop()
    recorder.close()
    ticks = spent[1] - ticks0
    return {
        "wall": wall,
        "ticks": ticks,
        "series": series,
        "bytes_per_min": size / wall * 60,
        "raw_per_min": raw / wall * 60,
        "recorder_ms_per_poll": (spent[0] - spent0) / max(ticks, 1) * 1000,
        "recorder_pct": (spent[0] - spent0) / wall * 100,
        "loop_pct": loop_cpu / wall * 100,
    }


async def measure_retention(seconds: float, folder: Path) -> dict[str, float]:
    """A small limit and a fast poll: many rotations; the folder size after every tick."""
    from console.cli.services import Services
    from console.server.session_recorder import SessionRecorder
    from console.telemetry.recording import SUFFIX

    services = Services.create(demo=True)
    monitor = services.monitor(interval_s=0.02)
    recorder = SessionRecorder(
        monitor, folder, demo=True, topology=services.topology(), max_bytes=RETENTION_LIMIT
    )
    recorder.start()
    sizes: list[int] = []

    def check(now: float, result: object) -> None:
        sizes.append(sum(p.stat().st_size for p in folder.glob(f"*{SUFFIX}")))

    monitor.poller.listeners.append(check)
    await monitor.start()
    await asyncio.sleep(seconds)
    await monitor.stop()
    recorder.close()
    final = sum(p.stat().st_size for p in folder.glob(f"*{SUFFIX}"))
    return {
        "ticks": len(sizes),
        "files_written": len(recorder.files),
        "files_left": len(list(folder.glob(f"*{SUFFIX}"))),
        "max_seen": max([*sizes, final]),
        "final": final,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--retention-seconds", type=float, default=40.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ddconsole-bench-recorder-")
    env = dict(os.environ, XDG_STATE_HOME=work, XDG_CONFIG_HOME=work)
    os.environ.update(XDG_STATE_HOME=work, XDG_CONFIG_HOME=work)
    load_pids: list[int] = []
    try:
        start_demo_load(env, (30011, 30012), load_pids)
        print(f"session: {args.seconds:.0f} s at 1 s polls", file=sys.stderr, flush=True)
        session = asyncio.run(measure_session(args.seconds))
        print(
            f"retention: {args.retention_seconds:.0f} s at 20 ms polls", file=sys.stderr, flush=True
        )
        retention = asyncio.run(measure_retention(args.retention_seconds, Path(work) / "retention"))
        print("done", file=sys.stderr, flush=True)
    finally:
        stop_demo_load(env, load_pids)
    held = retention["max_seen"] <= RETENTION_LIMIT
    hours_kept = 256 * 1024 * 1024 / max(session["bytes_per_min"], 1) / 60
    body = (
        "`python bench/recorder.py`: 8 simulated GPUs, 2 managed simulator servers (Qwen3.6-27B\n"
        "tp1 ddtree-b15) each under a detached 2-stream benchmark, monitor at 1 s with the\n"
        f"session recorder attached, {session['wall']:.0f} s measured "
        f"({session['ticks']:.0f} polls, {session['series']:.0f} series). "
        f"{os.cpu_count()} CPUs.\n\n"
        "| what | measured |\n| --- | --- |\n"
        f"| recording size on disk (gzip JSONL) | {session['bytes_per_min'] / 1024:.1f} KiB/min "
        f"({session['bytes_per_min'] * 60 / 1024 / 1024:.1f} MiB/hour) |\n"
        f"| same, uncompressed JSON | {session['raw_per_min'] / 1024:.1f} KiB/min |\n"
        f"| recorder CPU on the event loop | {session['recorder_ms_per_poll']:.2f} ms per poll, "
        f"{session['recorder_pct']:.2f}% of one core |\n"
        f"| whole monitor loop thread, for scale | {session['loop_pct']:.2f}% of one core |\n"
        f"| default retention (256 MiB) | about {hours_kept:.0f} hours of such sessions |\n\n"
        f"Retention: limit {RETENTION_LIMIT // 1024} KiB, polled every 20 ms for "
        f"{args.retention_seconds:.0f} s ({retention['ticks']:.0f} polls): "
        f"{retention['files_written']:.0f} files written, {retention['files_left']:.0f} left; "
        f"largest folder size seen after any poll {retention['max_seen'] / 1024:.1f} KiB, "
        f"final {retention['final'] / 1024:.1f} KiB — "
        + ("**the limit held**." if held else "**the limit was exceeded**.")
        + "\n"
    )
    print(body)
    if not args.no_write:
        update_results("Flight recorder (issue 8)", body)
    if not held:
        sys.exit(1)


if __name__ == "__main__":
    main()
