"""What one telemetry tick costs, and whether memory stays flat.

1. CPU per tick for 8 GPUs + 2 servers (the default dashboard), then 64 GPUs + 16 servers.
   GPUs are the simulated host's (the same code path above console.hw as NVML readings);
   servers are real simulator processes kept busy by a load generator in another process.
   Loop CPU is the event-loop thread's CPU time (HTTP, parsing, rates, store writes);
   executor CPU is the rest of this process's CPU time during the tick (GPU and host reads).
   Budget: <= 10 ms of loop time per tick at 8 GPUs + 2 servers.
2. RSS over a long run polling fast with a small store: it fills to capacity, then stays flat.

    python bench/telemetry.py [--long-seconds 120]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import update_results
from console.core.net import free_port
from console.hw.host import own_rss_bytes
from console.hw.simulated import SimulatedGpuBackend, SimulatedHostReader, SimulatedHostSpec
from console.server.monitor import Monitor
from console.topology.discover import discover

SIM = [
    sys.executable,
    "-m",
    "console.sim",
    "--model-path",
    "Qwen/Qwen3.6-27B",
    "--served-model-name",
    "qwen3.6-27b",
    "--enable-metrics",
    "--speculative-algorithm",
    "DDTREE",
    "--speculative-ddtree-budget",
    "15",
    "--speculative-draft-model-path",
    "x",
    "--max-running-requests",
    "32",
]
LOADER = """
import sys, httpx
with httpx.Client(timeout=60) as client:
    while True:
        for url in sys.argv[1:]:
            client.post(url + "/generate", json={"input_ids": [1] * 32,
                        "sampling_params": {"max_new_tokens": 256, "ignore_eos": True}})
"""


def start_servers(count: int, speed: float) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    procs, urls = [], []
    for _ in range(count):
        port = free_port()
        procs.append(
            subprocess.Popen(
                [*SIM, "--port", str(port), "--sim-speed", str(speed)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        urls.append(f"http://127.0.0.1:{port}")
    for url in urls:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    return procs, urls


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def with_load(urls: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", LOADER, *urls], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def monitor_for(urls: list[str], gpus: int, interval: float, capacity: int = 3600) -> Monitor:
    backend = SimulatedGpuBackend(None, SimulatedHostSpec(gpu_count=gpus))
    return Monitor(
        None,
        backend,
        SimulatedHostReader(backend),
        discover(backend, backend.numa_nodes),
        interval_s=interval,
        urls=urls,
        capacity=capacity,
    )


def measure_ticks(gpus: int, servers: int, ticks: int = 20) -> dict[str, float]:
    procs, urls = start_servers(servers, speed=1)
    procs.append(with_load(urls))
    monitor = monitor_for(urls, gpus, 1.0)
    loop_cpu: list[float] = []
    other_cpu: list[float] = []
    wall: list[float] = []

    async def run() -> None:
        await monitor.poller.poll_all_once()  # baselines and static facts
        for _ in range(ticks):
            loop_before, all_before = time.thread_time(), time.process_time()
            start = time.perf_counter()
            await monitor.poller.poll_all_once()
            wall.append(time.perf_counter() - start)
            loop = time.thread_time() - loop_before
            loop_cpu.append(loop)
            other_cpu.append(max(0.0, time.process_time() - all_before - loop))
            await asyncio.sleep(0.3)
        await monitor.stop()

    try:
        asyncio.run(run())
    finally:
        stop_all(procs)

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    return {
        "loop_ms": 1000 * mean(loop_cpu),
        "loop_ms_max": 1000 * max(loop_cpu),
        "executor_ms": 1000 * mean(other_cpu),
        "wall_ms": 1000 * mean(wall),
        "series": float(monitor.store.series_count()),
    }


def long_run(seconds: float) -> list[tuple[float, float]]:
    procs, urls = start_servers(2, speed=50)
    procs.append(with_load(urls))
    monitor = monitor_for(urls, 8, 0.05, capacity=600)
    points: list[tuple[float, float]] = []

    async def run() -> None:
        await monitor.start()
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            await asyncio.sleep(seconds / 12)
            points.append((time.monotonic() - start, (own_rss_bytes() or 0) / 2**20))
        await monitor.stop()

    try:
        asyncio.run(run())
    finally:
        stop_all(procs)
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--long-seconds", type=float, default=120.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    small = measure_ticks(8, 2)
    print("8 GPUs + 2 servers:", small)
    large = measure_ticks(64, 16, ticks=10)
    print("64 GPUs + 16 servers:", large)
    points = long_run(args.long_seconds)
    print("RSS over time:", points)
    settled = [mb for t, mb in points if t > args.long_seconds / 3]

    def row(label: str, m: dict[str, float]) -> str:
        return (
            f"| {label} | {m['loop_ms']:.2f} ms (max {m['loop_ms_max']:.2f}) | "
            f"{m['executor_ms']:.2f} ms | {m['wall_ms']:.1f} ms | {m['series']:.0f} |"
        )

    body = "\n".join(
        [
            "`python bench/telemetry.py`: simulated-host GPUs through console.hw, real simulator "
            "processes under load as servers; means over the ticks (max in brackets).",
            "",
            "| setup | loop thread CPU / tick | executor CPU / tick | wall / tick | series |",
            "| --- | --- | --- | --- | --- |",
            row("8 GPUs + 2 servers", small),
            row("64 GPUs + 16 servers", large),
            "",
            "Budget: <= 10 ms of loop time per tick at 8 GPUs + 2 servers.",
            "",
            f"RSS over a {args.long_seconds:.0f} s run polling every 50 ms (store capacity 600 "
            "samples per series, full after 30 s; 2 servers at --sim-speed 50): "
            + ", ".join(f"{t:.0f}s {mb:.1f} MiB" for t, mb in points)
            + f". Once the store is full: {min(settled):.1f}-{max(settled):.1f} MiB.",
        ]
    )
    if not args.no_write:
        update_results("Telemetry (issue 5)", body)


if __name__ == "__main__":
    main()
