"""How closely trace replay keeps a trace's arrival times: each request's send time against
the time its trace row asks for (its `send_late_s`).

A simulator at --sim-speed 1 (real time) on one core, the level runner on the other; three
traces: short prompts at a high Poisson rate, long prompts (2-8k tokens, whose JSON bodies
take longest to build) at a lower one, and Mooncake-style agent sessions (hash ids, 4-18k
tokens, each request resending its session's earlier blocks). Reported per trace: lateness
median, p90, p99 and max, and the drift (median lateness of the last third minus the first
third), with the machine's load average before and after (other work on a 2-core machine
delays sends on the scheduler, which no client can help).

    python bench/trace_replay.py [--requests 600] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import update_results
from console.bench.client import Endpoint, RequestResult, make_client
from console.bench.levels import LevelSpec, Target, run_level
from console.bench.workload import Workload
from console.bench.workload_trace import MOONCAKE_BLOCK, Trace, TraceReplay, TraceRow
from console.core.net import free_port

MODEL = ["--model-path", "meta-llama/Llama-3.1-8B-Instruct"]


def poisson_trace(count: int, rate: float, inputs: tuple[int, int], seed: int) -> Trace:
    rng = random.Random(seed)
    at = 0.0
    rows = []
    for _ in range(count):
        rows.append(TraceRow(at, rng.randint(*inputs), rng.randint(8, 48)))
        at += rng.expovariate(rate)
    return Trace(f"poisson-{rate:g}/s", "jsonl", tuple(rows))


def mooncake_trace(count: int, rate: float, sessions: int, seed: int) -> Trace:
    """Mooncake-style agent traffic: each request continues one of `sessions` sessions,
    resending its context (the session's earlier hash ids) plus 1-4 new 512-token blocks,
    so most of every prompt is blocks an earlier row already named."""
    rng = random.Random(seed)
    contexts: list[list[int]] = [[] for _ in range(sessions)]
    next_block = 0
    at = 0.0
    rows = []
    for _ in range(count):
        context = contexts[rng.randrange(sessions)]
        if len(context) >= 32:
            context.clear()
        grow = rng.randint(1, 4) if context else rng.randint(8, 16)
        context.extend(range(next_block, next_block + grow))
        next_block += grow
        length = len(context) * MOONCAKE_BLOCK - rng.randint(0, MOONCAKE_BLOCK - 1)
        rows.append(TraceRow(at, length, rng.randint(8, 48), hash_ids=tuple(context)))
        at += rng.expovariate(rate)
    return Trace(f"mooncake-{sessions}-sessions-{rate:g}/s", "mooncake", tuple(rows))


async def replay(url: str, trace: Trace) -> list[float]:
    """Lateness of every send, in seconds, against the trace row's time."""
    sent: dict[int, RequestResult] = {}
    spec = LevelSpec(0, None, None, len(trace.rows), None, warmup=1, replay=1.0)
    workload = Workload(source=TraceReplay(trace))
    async with make_client(256, timeout_s=300) as client:
        outcome = await run_level(
            client,
            Target(url),
            Endpoint.GENERATE,
            workload,
            spec,
            on_result=lambda i, r: sent.__setitem__(i, r),
            stop=asyncio.Event(),
        )
    errors = [r.error for r in outcome.results if r.error]
    if errors:
        sys.exit(f"{len(errors)} requests failed: {errors[0]}")
    # Each request's own record: when it went out against its time on the trace's clock.
    return [sent[i].send_late_s or 0.0 for i in sorted(sent)]


def figures(late: list[float]) -> str:
    ordered = sorted(late)
    third = len(late) // 3
    drift = statistics.median(late[-third:]) - statistics.median(late[:third])

    def ms(value: float) -> str:
        return f"{value * 1000:.2f} ms"

    return (
        f"median {ms(statistics.median(late))}, p90 {ms(ordered[int(len(late) * 0.9)])}, "
        f"p99 {ms(ordered[int(len(late) * 0.99)])}, max {ms(ordered[-1])}, "
        f"min {ms(ordered[0])}, drift {ms(drift)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cpus = sorted(os.sched_getaffinity(0))
    sim_cpu, client_cpu = cpus[0], cpus[-1]
    proc = subprocess.Popen(
        [
            *("taskset", "-c", str(sim_cpu), sys.executable, "-m", "console.sim", *MODEL),
            *("--port", str(port), "--sim-speed", "1", "--enable-metrics"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.sched_setaffinity(0, {client_cpu})
    traces = [
        poisson_trace(args.requests, 40.0, (64, 512), seed=1),
        poisson_trace(args.requests // 3, 10.0, (2048, 8192), seed=2),
        mooncake_trace(args.requests // 6, 4.0, sessions=8, seed=3),
    ]
    lines = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        for trace in traces:
            before = os.getloadavg()[0]
            late = asyncio.run(replay(url, trace))
            line = (
                f"{len(trace.rows)} requests, {trace.path}, prompts "
                f"{min(r.input_len for r in trace.rows)}-{max(r.input_len for r in trace.rows)}"
                f" tokens over {trace.span_s:.1f} s: lateness {figures(late)}"
                f" (load average {before:.1f} before, {os.getloadavg()[0]:.1f} after)"
            )
            print(line)
            lines.append(line)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    body = (
        "`python bench/trace_replay.py` (trace replay: each request's send time against its "
        "trace row's time; simulator at --sim-speed 1 on one core, the level runner and its "
        "send thread on the other; the 1-minute load average around each trace):\n\n"
        + "\n".join(f"- {line}" for line in lines)
    )
    if not args.no_write:
        update_results("Trace replay timing (issue 20)", body)


if __name__ == "__main__":
    main()
