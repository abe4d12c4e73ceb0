"""Every simulator fault, as a client (and the console) would see it."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.simproc import QWEN, SMALL, running_sim, start_sim, stop_sim, wait_ready


def _wait_exit(sim, timeout: float = 30) -> int:
    return sim.proc.wait(timeout=timeout)


def _time_to_ready(args: list[str], tmp_path: Path, speed: float) -> float:
    sim = start_sim(args, tmp_path=tmp_path, speed=speed)
    start = time.monotonic()
    try:
        wait_ready(sim)
        return time.monotonic() - start
    finally:
        stop_sim(sim)


def test_slow_start_keeps_refusing_longer(tmp_path: Path):
    normal = _time_to_ready(SMALL, tmp_path, speed=10)
    slow = _time_to_ready([*SMALL, "--sim-fault", "slow-start"], tmp_path, speed=10)
    # Four times the load phases (about 5 simulated seconds here) at speed 10.
    assert slow - normal > 1.0, (normal, slow)


@pytest.mark.parametrize(
    ("kind", "line"),
    [
        ("oom", "torch.OutOfMemoryError: CUDA out of memory."),
        ("nccl", "torch.distributed.DistBackendError: NCCL error"),
        # sglang 0.5.23 srt/model_executor/pool_configurator.py:96
        (
            "kv-oom",
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=0.85",
        ),
        # sglang 0.5.23 srt/mem_cache/kv_cache_configurator.py:3394
        (
            "hybrid-oom",
            "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache",
        ),
    ],
)
def test_scheduler_crash_at_load_kills_the_tree_with_sigkill(tmp_path: Path, kind: str, line: str):
    """A scheduler fails while loading: its traceback, the leader's launch-phase SIGQUIT line,
    kill_process_tree, and the leader dies by its own SIGKILL (sglang 0.5.23
    srt/managers/scheduler.py:6370-6373, srt/entrypoints/engine.py:1976-1980,
    srt/utils/common.py:2546-2549)."""
    sim = start_sim(
        [*SMALL, "--tp-size", "2", "--sim-fault", f"crash-at-load:{kind}"],
        tmp_path=tmp_path,
        speed=20,
    )
    try:
        assert _wait_exit(sim) == -signal.SIGKILL
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{sim.url}/ready", timeout=1)
        log = sim.log()
        assert "TP0] Scheduler hit an exception: Traceback (most recent call last):" in log
        assert line in log
        sigquit = "] Received sigquit from a child process. It usually means the child failed."
        assert sigquit in log
        assert log.index(line) < log.index(sigquit) < log.index("] kill_process_tree called: ")
        assert "fired up" not in log
        deadline = time.monotonic() + 5
        while _group_members(sim.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _group_members(sim.proc.pid) == []  # the children went with it
    finally:
        stop_sim(sim)


@pytest.mark.parametrize(
    ("kind", "lines"),
    [
        (
            "import",
            ["ImportError: cannot import name 'SparsityStructure' from 'compressed_tensors"],
        ),
        ("notfound", ["OSError: We couldn't connect to 'https://huggingface.co'"]),
        # transformers 5.19 utils/hub.py:611-614
        (
            "gated",
            [
                "OSError: You are trying to access a gated repo.",
                "Make sure to have access to it at "
                "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct.",
            ],
        ),
        # sglang 0.5.23 srt/utils/common.py:2429-2432 via srt/entrypoints/engine.py:1962
        (
            "version",
            [
                "Exception: sglang-kernel is installed with version 0.4.1, which is less than "
                "the minimum required version 0.4.9."
            ],
        ),
    ],
)
def test_leader_crash_at_load_exits_1_before_any_scheduler(
    tmp_path: Path, kind: str, lines: list[str]
):
    sim = start_sim([*SMALL, "--sim-fault", f"crash-at-load:{kind}"], tmp_path=tmp_path, speed=20)
    try:
        assert _wait_exit(sim) == 1
        log = sim.log()
        for line in lines:
            assert line in log
        assert "Traceback (most recent call last):" in log
        assert "Scheduler hit an exception" not in log
        assert "Init parallel begin." not in log
        assert "include_parent=False" in log  # launch_server's `finally`
    finally:
        stop_sim(sim)


def test_bad_flag_exits_2_like_argparse(tmp_path: Path):
    sim = start_sim([*SMALL, "--sim-fault", "crash-at-load:badflag"], tmp_path=tmp_path)
    assert _wait_exit(sim) == 2
    assert "sglang serve: error: unrecognized arguments" in sim.log()


def test_invalid_flag_value_exits_2(tmp_path: Path):
    sim = start_sim([*SMALL, "--tp-size", "two"], tmp_path=tmp_path)
    assert _wait_exit(sim) == 2
    assert "argument --tp-size/--tensor-parallel-size: invalid int value: 'two'" in sim.log()


def test_crash_mid_stream_cuts_the_stream_and_dies_by_sigkill(tmp_path: Path):
    sim = start_sim([*QWEN, "--sim-fault", "crash-mid-stream:8"], tmp_path=tmp_path, speed=20)
    try:
        wait_ready(sim)
        received = 0
        with (
            pytest.raises(httpx.HTTPError),
            httpx.stream(
                "POST",
                f"{sim.url}/generate",
                timeout=10,
                json={
                    "input_ids": [1] * 8,
                    "stream": True,
                    "sampling_params": {"max_new_tokens": 200, "ignore_eos": True},
                },
            ) as response,
        ):
            for line in response.iter_lines():
                if line.startswith("data: {"):
                    received += 1
        assert 1 <= received < 200
        assert _wait_exit(sim) == -signal.SIGKILL
        log = sim.log()
        assert "CUDA error: an illegal memory access was encountered" in log
        # The serving-phase handler (sglang 0.5.23 srt/managers/tokenizer_manager.py:4072-4074).
        assert (
            "SIGQUIT received. signum=None, frame=None. It usually means one child failed." in log
        )
        assert "Received sigquit from a child process" not in log
    finally:
        stop_sim(sim)


def test_hang_stays_alive_but_stops_answering(tmp_path: Path):
    with running_sim([*SMALL, "--sim-fault", "hang:0.5"], tmp_path, speed=1) as sim:
        time.sleep(1.0)
        with pytest.raises(httpx.TimeoutException):
            httpx.get(f"{sim.url}/ready", timeout=1)
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{sim.url}/generate", timeout=1, json={"input_ids": [1]})
        assert sim.proc.poll() is None
        # SIGTERM cannot be handled by a blocked loop: only SIGKILL removes it.
        os.kill(sim.proc.pid, signal.SIGTERM)
        time.sleep(0.5)
        assert sim.proc.poll() is None


def test_bad_metrics_is_not_prometheus(tmp_path: Path):
    with running_sim([*SMALL, "--sim-fault", "bad-metrics"], tmp_path) as sim:
        text = httpx.get(f"{sim.url}/metrics").text
        with pytest.raises(ValueError):
            list(text_string_to_metric_families(text))
        assert httpx.get(f"{sim.url}/ready").status_code == 200


def test_metrics_nan_and_inf(tmp_path: Path):
    with running_sim([*SMALL, "--sim-fault", "metrics-nan"], tmp_path) as sim:
        families = {
            f.name: f for f in text_string_to_metric_families(httpx.get(f"{sim.url}/metrics").text)
        }
        assert str(families["sglang:gen_throughput"].samples[0].value) == "nan"
        assert families["sglang:spec_accept_length"].samples[0].value == float("inf")


def test_metrics_reset_drops_counters(tmp_path: Path):
    # Counters reset every 40 simulated seconds (2 s at 20x): a request is counted, then the
    # count drops to 0. On a busy box a reset can fall between the request and the first
    # read, so a count of 0 before any was seen sends the request again.
    with running_sim([*SMALL, "--sim-fault", "metrics-reset:40"], tmp_path, speed=20) as sim:

        def send() -> None:
            httpx.post(
                f"{sim.url}/generate",
                json={"input_ids": [1], "sampling_params": {"max_new_tokens": 4}},
                timeout=30,
            )

        def total() -> float:
            families = {
                f.name: f
                for f in text_string_to_metric_families(httpx.get(f"{sim.url}/metrics").text)
            }
            return sum(
                s.value
                for s in families["sglang:num_requests"].samples
                if s.name.endswith("_total")
            )

        send()
        deadline = time.monotonic() + 20
        counted = reset = False
        while time.monotonic() < deadline and not reset:
            value = total()
            if value >= 1:
                counted = True
            elif counted:
                reset = True
            else:
                send()
            time.sleep(0.1)
        assert counted
        assert reset


def test_http_500_rate(tmp_path: Path):
    with running_sim([*SMALL, "--sim-fault", "http-500:1.0"], tmp_path) as sim:
        reply = httpx.post(f"{sim.url}/generate", json={"input_ids": [1]})
        assert reply.status_code == 500
        assert reply.json()["type"] == "InternalServerError"
        chat = httpx.post(
            f"{sim.url}/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]}
        )
        assert chat.status_code == 500
        assert httpx.get(f"{sim.url}/metrics").status_code == 200
    with running_sim([*SMALL, "--sim-fault", "http-500:0.5", "--sim-seed", "3"], tmp_path) as sim:
        codes = [
            httpx.post(
                f"{sim.url}/generate",
                json={"input_ids": [1], "sampling_params": {"max_new_tokens": 1}},
            ).status_code
            for _ in range(40)
        ]
        assert 5 < codes.count(500) < 35
        assert codes.count(200) == 40 - codes.count(500)


def test_port_in_use_fails_after_loading(tmp_path: Path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        sim = start_sim(SMALL, tmp_path=tmp_path, port=port, speed=20)
        try:
            assert _wait_exit(sim) == 3  # uvicorn's STARTUP_FAILURE
        finally:
            stop_sim(sim)
    log = sim.log()
    assert "Load weight end." in log  # the whole load was spent first, as with SGLang
    assert "] ERROR:    [Errno 98] error while attempting to bind on address" in log
    assert "address already in use" in log
    # uvicorn's lifespan runs around the failed bind; then launch_server's `finally`.
    assert log.index("Application startup complete.") < log.index("[Errno 98]")
    assert log.index("[Errno 98]") < log.index("Application shutdown complete.")
    assert log.index("Application shutdown complete.") < log.index("include_parent=False")
    assert "Uvicorn running on" not in log


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def test_children_die_with_the_leader(tmp_path: Path):
    sim = start_sim([*SMALL, "--tp-size", "2"], tmp_path=tmp_path)
    try:
        wait_ready(sim)
        assert len(_group_members(sim.proc.pid)) == 4  # leader, 2 schedulers, detokenizer
        os.kill(sim.proc.pid, signal.SIGKILL)
        sim.proc.wait()
        deadline = time.monotonic() + 5
        while _group_members(sim.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _group_members(sim.proc.pid) == []
    finally:
        stop_sim(sim)


def test_orphans_survive_the_leader(tmp_path: Path):
    sim = start_sim([*SMALL, "--tp-size", "2", "--sim-fault", "orphans"], tmp_path=tmp_path)
    try:
        wait_ready(sim)
        os.kill(sim.proc.pid, signal.SIGKILL)
        sim.proc.wait()
        time.sleep(0.3)
        assert len(_group_members(sim.proc.pid)) == 3
    finally:
        os.killpg(sim.proc.pid, signal.SIGKILL)


def test_sigterm_during_load_kills_at_once(tmp_path: Path):
    sim = start_sim(SMALL, tmp_path=tmp_path, speed=1)
    try:
        time.sleep(0.5)
        os.kill(sim.proc.pid, signal.SIGTERM)
        assert _wait_exit(sim, 5) == -signal.SIGTERM
    finally:
        stop_sim(sim)


def test_sigterm_after_ready_drains_running_requests(tmp_path: Path):
    with (
        running_sim(QWEN, tmp_path, speed=10) as sim,
        httpx.stream(
            "POST",
            f"{sim.url}/generate",
            timeout=30,
            json={
                "input_ids": [1] * 8,
                "stream": True,
                # About 2 s of real time at 10x: still draining when /ready is asked on a
                # loaded box (60 tokens had drained and exited before it once).
                "sampling_params": {"max_new_tokens": 600, "ignore_eos": True},
            },
        ) as response,
    ):
        lines = response.iter_lines()
        next(line for line in lines if line.startswith("data: {"))
        os.kill(sim.proc.pid, signal.SIGTERM)
        time.sleep(0.05)
        assert httpx.get(f"{sim.url}/ready", timeout=2).status_code == 503
        rest = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
        assert rest[-1]["meta_info"]["completion_tokens"] == 600
        assert _wait_exit(sim) == 0
    log = sim.log()
    # sglang 0.5.23 srt/managers/tokenizer_manager.py:4066-4070, 3530-3532
    assert (
        "] SIGTERM received. signum=None frame=None. Draining requests and shutting down..." in log
    )
    assert "Gracefully exiting... Remaining number of requests 1. Remaining requests " in log
    assert "Gracefully exiting... Remaining number of requests 0. Remaining requests " in log
