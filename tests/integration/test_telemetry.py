"""Telemetry against real simulator processes, fake NVML and the simulated host."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from console.hw.nvml import NvmlBackend
from console.hw.simulated import SimulatedGpuBackend, SimulatedHostReader
from console.server.monitor import Monitor, reading
from console.sim.stats import E2E_BUCKETS, TTFT_BUCKETS
from console.telemetry.gpu_source import GpuSource
from console.telemetry.keys import SourceId
from console.telemetry.poller import Poller
from console.telemetry.samples import ServerSample, SourceState
from console.telemetry.sglang_source import SglangSource
from console.telemetry.store import TimeSeriesStore
from console.topology.discover import discover
from tests.conftest import REPO
from tests.fakes.fake_pynvml import NVML_ERROR_LIBRARY_NOT_FOUND, FakeDevice, FakePynvml
from tests.simproc import QWEN, SMALL, running_sim

SPEED = 10.0
DDTREE15 = [
    "--speculative-algorithm",
    "DDTREE",
    "--speculative-ddtree-budget",
    "15",
    "--speculative-draft-model-path",
    "z-lab/Qwen3.6-27B-DFlash",
    "--max-running-requests",
    "32",
]


class Load:
    """Closed-loop clients keeping a server busy from background threads."""

    def __init__(self, url: str, workers: int, tokens: int) -> None:
        self.url = url
        self.tokens = tokens
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(workers)]

    def _run(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self.stop.is_set():
                try:
                    client.post(
                        f"{self.url}/generate",
                        json={
                            "input_ids": [1] * 64,
                            "sampling_params": {"max_new_tokens": self.tokens, "ignore_eos": True},
                        },
                    )
                except httpx.HTTPError:
                    return

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


def _url_monitor(url: str, interval: float) -> Monitor:
    backend = SimulatedGpuBackend(None)
    return Monitor(
        None,
        backend,
        SimulatedHostReader(backend),
        discover(backend, backend.numa_nodes),
        interval_s=interval,
        urls=[url],
    )


def _bucket(value: float, bounds: tuple[float, ...]) -> int:
    return next((i for i, b in enumerate(bounds) if value <= b), len(bounds))


def test_derived_metrics_match_the_simulators_ground_truth(tmp_path: Path):
    with running_sim([*QWEN, *DDTREE15], tmp_path, speed=SPEED) as sim, Load(sim.url, 4, 96):
        monitor = _url_monitor(sim.url, 0.5)
        source_key = f"server.127.0.0.1:{sim.port}"

        async def observe() -> tuple[dict, dict, float, float]:
            await monitor.start()
            await asyncio.sleep(3)  # warm: rates and a full latency window exist
            first_truth = sim.stats()
            start = time.monotonic()
            await asyncio.sleep(6)
            last_truth = sim.stats()
            end = time.monotonic()
            await monitor.stop()
            return first_truth, last_truth, start, end

        first, last, start, end = asyncio.run(observe())
    store = monitor.store
    rates = [
        v
        for t, v in zip(
            *store.window(f"{source_key}.decode_tok_s", since=start).__dict__.values(), strict=True
        )
        if t <= end and v is not None
    ]
    console_tok_s = statistics.mean(rates)
    truth_tok_s = (last["decode_tokens_total"] - first["decode_tokens_total"]) / (
        last["sim_time_s"] - first["sim_time_s"]
    )
    assert abs(console_tok_s - truth_tok_s) <= 0.03 * truth_tok_s, (console_tok_s, truth_tok_s)
    accept = store.latest_value(f"{source_key}.accept_length")
    truth_accept = last["decode_tokens_total"] / last["request_verify_steps_total"]
    assert accept is not None
    assert abs(accept - truth_accept) <= 0.03 * truth_accept, (accept, truth_accept)
    # Windowed percentiles: the console's estimate lies in the bucket of the simulator's own
    # value over the same window, or the one next to it.
    sample = store.server(f"127.0.0.1:{sim.port}")
    assert isinstance(sample, ServerSample)
    window_start = last["sim_time_s"] - 10 * SPEED
    finished = [r for r in last["requests"] if r["finished_s"] >= window_start]
    true_ttft = statistics.median(r["ttft_s"] for r in finished)
    true_e2e = statistics.median(r["e2e_s"] for r in finished)
    assert sample.ttft_p50_s is not None
    assert sample.e2e_p50_s is not None
    assert abs(_bucket(sample.ttft_p50_s, TTFT_BUCKETS) - _bucket(true_ttft, TTFT_BUCKETS)) <= 1
    assert abs(_bucket(sample.e2e_p50_s, E2E_BUCKETS) - _bucket(true_e2e, E2E_BUCKETS)) <= 1
    assert sample.itl_p50_s is not None
    assert sample.running is not None
    assert sample.running >= 1


async def _poll_source(source: SglangSource, times: int, gap: float) -> list:
    store = TimeSeriesStore(100)
    poller = Poller(store)
    poller.add(source)
    results = []
    for _ in range(times):
        await poller.poll_once(source)
        results.append((store.statuses()[source.name], store.latest(source.name)))
        await asyncio.sleep(gap)
    return results


@pytest.mark.parametrize(
    ("fault", "state", "words"),
    [
        (
            "bad-metrics",
            SourceState.UNAVAILABLE,
            "bad /metrics: line 1 is not Prometheus text: "
            "'sglang:gen_throughput{model_name=\"x\" 12'",
        ),
        (
            "metrics-nan",
            SourceState.DEGRADED,
            "NaN/Inf in sglang:gen_throughput, sglang:spec_accept_length",
        ),
        ("metrics-500", SourceState.UNAVAILABLE, "HTTP 500 from /metrics"),
    ],
)
def test_bad_metrics_degrade_only_that_source(
    tmp_path: Path, fault: str, state: SourceState, words: str
):
    with running_sim([*SMALL, "--sim-fault", fault], tmp_path) as sim:

        async def run() -> list:
            async with httpx.AsyncClient() as client:
                return await _poll_source(SglangSource("x", sim.url, client), 2, 0.1)

        results = asyncio.run(run())
    status, sample = results[-1]
    assert status.state is state
    assert status.reason is not None
    assert words in status.reason
    if fault == "metrics-nan":
        assert isinstance(sample, ServerSample)
        assert sample.gen_throughput is None  # NaN never reaches a chart


def test_counter_reset_never_gives_negative_rates(tmp_path: Path):
    with (
        running_sim([*SMALL, "--sim-fault", "metrics-reset:10"], tmp_path, speed=20) as sim,
        Load(sim.url, 2, 64),
    ):

        async def run() -> list:
            async with httpx.AsyncClient() as client:
                return await _poll_source(SglangSource("x", sim.url, client), 12, 0.15)

        results = asyncio.run(run())
    rates = [s.decode_tok_s for _, s in results if s is not None and s.decode_tok_s is not None]
    assert len(rates) >= 8
    assert min(rates) >= 0
    assert "counters reset" in sim.log()


def test_a_server_that_stops_answering_goes_stale_then_refused(tmp_path: Path):
    with running_sim([*SMALL, "--sim-fault", "hang:0.3"], tmp_path, speed=1) as sim:
        time.sleep(0.6)

        async def run() -> list:
            async with httpx.AsyncClient() as client:
                return await _poll_source(SglangSource("x", sim.url, client, interval_s=0.5), 1, 0)

        status, _ = asyncio.run(run())[0]
        assert status.state is SourceState.STALE
        assert status.reason == "no answer within 0.4 s"

    # Once the process is gone, connections are refused.
    async def after() -> list:
        async with httpx.AsyncClient() as client:
            return await _poll_source(SglangSource("x", sim.url, client), 1, 0)

    status, _ = asyncio.run(after())[0]
    assert status.state is SourceState.UNAVAILABLE
    assert status.reason == "connection refused"


async def _gpu_poll(
    backend: NvmlBackend, times: int = 1, interval: float = 0.2
) -> tuple[TimeSeriesStore, list[float]]:
    store = TimeSeriesStore(100)
    poller = Poller(store)
    source = GpuSource(backend, interval_s=interval)
    poller.add(source)
    gaps: list[float] = []
    ticker_done = asyncio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not ticker_done.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    for _ in range(times):
        await poller.poll_once(source)
        await asyncio.sleep(interval)
    ticker_done.set()
    await task
    await poller.stop()
    return store, gaps


def test_nvml_library_missing_is_a_state_not_a_crash():
    store, _ = asyncio.run(
        _gpu_poll(NvmlBackend(FakePynvml(init_error=NVML_ERROR_LIBRARY_NOT_FOUND)))
    )
    status = store.statuses()[SourceId.GPUS]
    assert status.state is SourceState.UNAVAILABLE
    assert status.reason == "no GPU telemetry: NVML library not found"


def test_one_failing_gpu_degrades_only_that_gpu():
    fake = FakePynvml([FakeDevice(), FakeDevice(lost=True), FakeDevice()])
    store, _ = asyncio.run(_gpu_poll(NvmlBackend(fake), times=2))
    statuses = store.statuses()
    assert statuses[SourceId.gpu(0)].state is SourceState.OK
    assert statuses[SourceId.gpu(2)].state is SourceState.OK
    assert statuses[SourceId.gpu(1)].state is SourceState.UNAVAILABLE
    assert "GPU is lost" in (statuses[SourceId.gpu(1)].reason or "")
    assert statuses[SourceId.GPUS].state is SourceState.DEGRADED
    assert store.latest_value("gpu.0.util_pct") == 35.0
    # Counters are rated between polls: 0 bytes moved here, but a rate exists.
    assert store.latest_value(SourceId.gpu(0).series("pcie_tx_bytes_s")) == 0.0


def test_a_hanging_nvml_call_stalls_the_source_not_the_loop():
    hang_s = 1.5
    fake = FakePynvml([FakeDevice(hang_seconds=hang_s)])
    store, gaps = asyncio.run(_gpu_poll(NvmlBackend(fake), times=4, interval=0.2))
    assert store.statuses()[SourceId.GPUS].state is SourceState.STALLED
    assert "NVML call still running" in (store.statuses()[SourceId.GPUS].reason or "")
    # The loop kept ticking throughout: a blocked loop would show a gap as long as the hang;
    # a third of it leaves room for a busy machine's scheduling.
    assert max(gaps) < hang_s / 3
    # Skipped, not queued: one call in flight at most.
    assert fake.calls["nvmlDeviceGetUtilizationRates"] <= 2


def test_metrics_cli_once_json_with_a_url(tmp_path: Path):
    with running_sim([*QWEN, *DDTREE15], tmp_path, speed=SPEED) as sim, Load(sim.url, 2, 64):
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "console",
                "metrics",
                "--once",
                "--json",
                "--demo",
                "--url",
                sim.url,
                "--interval",
                "0.5",
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
            check=False,
            env={**os.environ},
        )
    assert completed.returncode == 0, completed.stderr
    data = json.loads(completed.stdout)
    assert [g["index"] for g in data["gpus"]] == list(range(8))
    for gpu in data["gpus"]:
        for key in (
            "util_pct",
            "mem_used_bytes",
            "mem_total_bytes",
            "power_w",
            "temp_c",
            "sm_clock_mhz",
            "mem_clock_mhz",
            "pcie_rx_bytes_s",
            "pcie_tx_bytes_s",
            "pcie_gen_current",
            "pcie_gen_max",
            "pcie_width_current",
            "pcie_width_max",
        ):
            assert key in gpu
    assert data["gpus"][6]["pcie_width_current"] == 8  # the demo's down-trained link
    assert [n["node"] for n in data["host"]["numa_nodes"]] == [0, 1]
    assert data["host"]["numa_nodes"][1]["gpus"] == [4, 5, 6, 7]
    (server,) = data["servers"]
    assert server["id"] == f"127.0.0.1:{sim.port}"
    for key in (
        "tok_s",
        "running",
        "queued",
        "token_usage",
        "accept_length",
        "accept_rate",
        "ttft_p50_s",
        "ttft_p99_s",
        "itl_p50_s",
        "itl_p99_s",
    ):
        assert key in server
    assert server["tok_s"] is not None
    assert server["tok_s"] > 0
    assert server["metrics_source"]["state"] == "ok"
    assert {s["name"] for s in data["sources"]} >= {
        "gpu",
        "host",
        "console",
        f"server:127.0.0.1:{sim.port}",
    }


def test_metrics_cli_watch_prints_a_line_per_tick_without_a_tty(tmp_path: Path):
    with running_sim(SMALL, tmp_path) as sim:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "console",
                "metrics",
                "--watch",
                "--interval",
                "0.3",
                "--demo",
                "--url",
                sim.url,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        lines: list[str] = []
        try:
            assert proc.stdout is not None
            while len(lines) < 3:
                lines.append(proc.stdout.readline())
        finally:
            proc.terminate()
            proc.communicate(timeout=10)
    assert all(f"127.0.0.1:{sim.port}" in line for line in lines)
    assert all("gpu util" in line for line in lines)


def test_managed_servers_and_their_binding_truth(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    from console.cli.services import Services
    from console.core.net import free_port
    from console.profiles.command import build_command
    from console.topology.placement import resolve

    services = Services.create(demo=True)
    manager = services.manager()
    loaded = services.catalog.get("qwen3.6-27b")
    plan = resolve(
        build_command(loaded, "tp4", "off", port=free_port(), demo=True, gpus=(4, 5, 6, 7)),
        services.topology(),
        port_checker=None,
    )
    record = manager.launch(plan)
    try:
        assert manager.wait(record.id, timeout=30).state.value == "ready"

        async def read_once() -> dict:
            monitor = services.monitor(interval_s=0.3)
            try:
                await monitor.once()
                return reading(monitor)
            finally:
                await monitor.stop()

        data = asyncio.run(read_once())
    finally:
        manager.stop(record.id, grace=5)
        manager.close()
    (server,) = data["servers"]
    assert server["id"] == record.id
    assert server["state"] == "ready"
    (binding,) = data["host"]["bindings"]
    assert binding["server_id"] == record.id
    assert binding["intended_nodes"] == [1]
    assert binding["actual_nodes"] == [1]
    assert binding["matches"] is True
    busy = {g["index"]: g["mem_used_bytes"] for g in data["gpus"]}
    assert busy[4] > busy[0]
