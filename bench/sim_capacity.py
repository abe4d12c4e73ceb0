"""How many streamed chunks per second the simulator produces on one core at zero delay.

The simulator runs with --sim-speed 0 pinned to CPU 0; a minimal aiohttp reader (it only
counts events) runs on CPU 1, so the simulator is the bottleneck being measured. Reported:
chunks/s over wall time, and chunks per CPU-second of the simulator process.

    python bench/sim_capacity.py [--streams 64] [--tokens 256] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import cpu_seconds, update_results
from console.core.net import free_port

MODEL = ["--model-path", "meta-llama/Llama-3.1-8B-Instruct"]


async def wait_ready(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(600):
            try:
                async with session.get(f"{url}/ready") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise SystemExit("simulator did not become ready")


async def one(session: aiohttp.ClientSession, url: str, tokens: int) -> int:
    body = {
        "input_ids": [1] * 64,
        "stream": True,
        "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True},
    }
    count = 0
    tail = b""
    async with session.post(f"{url}/generate", json=body) as response:
        async for chunk in response.content.iter_any():
            data = tail + chunk
            count += data.count(b"data: {")
            tail = data[-6:]  # a marker split across reads is counted once, with its end
            count -= tail.count(b"data: {")
    return count + tail.count(b"data: {")


async def round_(url: str, streams: int, tokens: int) -> tuple[int, float]:
    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.perf_counter()
        counts = await asyncio.gather(*(one(session, url, tokens) for _ in range(streams)))
        return sum(counts), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cpus = sorted(os.sched_getaffinity(0))
    sim_cpu, client_cpu = cpus[0], cpus[-1]
    proc = subprocess.Popen(
        [
            "taskset",
            "-c",
            str(sim_cpu),
            sys.executable,
            "-m",
            "console.sim",
            *MODEL,
            "--port",
            str(port),
            "--sim-speed",
            "0",
            "--enable-metrics",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.sched_setaffinity(0, {client_cpu})
    try:
        asyncio.run(wait_ready(url))
        results = []
        for _ in range(args.rounds):
            cpu_before = cpu_seconds(proc.pid)
            chunks, wall = asyncio.run(round_(url, args.streams, args.tokens))
            cpu = cpu_seconds(proc.pid) - cpu_before
            results.append((chunks, wall, cpu))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    rates = sorted(c / w for c, w, _ in results)
    median = rates[len(rates) // 2]
    best = max(results, key=lambda r: r[0] / r[1])
    lines = [
        f"round {i + 1}: {c} chunks in {w:.2f} s = {c / w:,.0f} chunks/s; simulator CPU "
        f"{cpu:.2f} s = {c / cpu:,.0f} chunks per CPU-second"
        for i, (c, w, cpu) in enumerate(results)
    ]
    print("\n".join(lines))
    body = (
        f"`python bench/sim_capacity.py` ({args.streams} streams x {args.tokens} tokens, "
        f"`/generate` with cumulative text and ids as SGLang streams them, simulator at "
        f"--sim-speed 0 pinned to one core, a counting-only aiohttp reader on the other core):\n\n"
        + "\n".join(f"- {line}" for line in lines)
        + f"\n\nMedian **{median:,.0f} chunks/s**, best {best[0] / best[1]:,.0f} chunks/s "
        f"({best[0] / best[2]:,.0f} per simulator CPU-second). Benchmarks of the console's "
        "own client against the simulator are bounded by this figure."
    )
    if not args.no_write:
        update_results("Simulator capacity (issue 3)", body)


if __name__ == "__main__":
    main()
