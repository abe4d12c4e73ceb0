"""Start real simulator processes on loopback ports for tests."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from console.core.net import free_port
from tests.conftest import REPO

QWEN = ["--model-path", "Qwen/Qwen3.6-27B", "--served-model-name", "qwen3.6-27b"]
KIMI = [
    "--model-path",
    "moonshotai/Kimi-K2.6",
    "--served-model-name",
    "kimi-k2.6",
    "--tp-size",
    "8",
]
SMALL = ["--model-path", "meta-llama/Llama-3.1-8B-Instruct"]
MTP = [
    *QWEN,
    "--speculative-algorithm",
    "NEXTN",
    "--speculative-draft-model-path",
    "Qwen/Qwen3.6-27B",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
]
"""Qwen3.6 with its MTP head (the `mtp` variant): an EAGLE-style draft of three steps."""


@dataclass
class SimProcess:
    url: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    speed: float

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def client(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)  # type: ignore[arg-type]

    def stats(self) -> dict:
        return httpx.get(f"{self.url}/sim/stats", timeout=10).json()


def start_sim(
    args: list[str],
    *,
    tmp_path: Path,
    speed: float = 20,
    env: dict[str, str] | None = None,
    port: int | None = None,
    name: str = "sim",
    metrics: bool = True,
) -> SimProcess:
    """`metrics=False` leaves out --enable-metrics (SGLang then has no /metrics route)."""
    port = port or free_port()
    log_path = tmp_path / f"{name}-{port}.log"
    argv = [
        sys.executable,
        "-m",
        "console.sim",
        *args,
        "--port",
        str(port),
        *(["--enable-metrics"] if metrics else []),
        "--sim-speed",
        str(speed),
    ]
    full_env = os.environ.copy()
    full_env.update(env or {})
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=full_env,
            start_new_session=True,
        )
    return SimProcess(f"http://127.0.0.1:{port}", port, proc, log_path, speed)


def wait_ready(sim: SimProcess, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sim.proc.poll() is not None:
            raise AssertionError(f"simulator exited {sim.proc.returncode}:\n{sim.log()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{sim.url}/ready", timeout=1).status_code == 200:
                return
        time.sleep(0.02)
    raise AssertionError(f"simulator not ready after {timeout} s:\n{sim.log()}")


def wait_for_log(sim: SimProcess, text: str, timeout: float = 60) -> str:
    """Wait until the simulator's log holds `text` (it must stay alive meanwhile); the log."""
    deadline = time.monotonic() + timeout
    while True:
        log = sim.log()
        if text in log:
            return log
        if sim.proc.poll() is not None:
            raise AssertionError(f"simulator exited {sim.proc.returncode}:\n{log}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} not logged after {timeout} s:\n{log}")
        time.sleep(0.02)


def stop_sim(sim: SimProcess) -> None:
    if sim.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sim.proc.pid, 9)
        sim.proc.wait(timeout=10)
    else:
        # Children of a crashed leader may linger in its process group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(sim.proc.pid, 9)


@contextlib.contextmanager
def running_sim(args: list[str], tmp_path: Path, **kwargs: object) -> Iterator[SimProcess]:
    sim = start_sim(args, tmp_path=tmp_path, **kwargs)  # type: ignore[arg-type]
    try:
        wait_ready(sim)
        yield sim
    finally:
        stop_sim(sim)
