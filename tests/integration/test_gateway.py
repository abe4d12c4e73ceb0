"""Two DP replicas behind SGLang's model gateway, with the real `smg` and real processes:
`up qwen3.6-27b --layout dp2-gateway` (demo) starts two simulator replicas and `smg launch`,
registers both once ready and is ready when the gateway is; a benchmark through the gateway
reports each worker's throughput from its `/engine_metrics`; a replica killed with SIGKILL is
out of the gateway's `GET /workers` within 2 s (smg alone would keep it for minutes);
`down` leaves no process and no listening port."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from console.core.net import free_port, port_is_free
from console.hw.procs import argv_of, environ_value, live_processes
from tests.conftest import REPO

pytestmark = pytest.mark.slow

SPEED = "20"
PROFILE = "qwen3.6-27b"
LAYOUT = "dp2-gateway"
OUTPUT_LEN = 32
REQUESTS = 32
SMG = Path(sys.executable).parent / "smg"
T = TypeVar("T")


def _smg_starts() -> str | None:
    """Why the real gateway cannot be used here, or None when it can."""
    if not SMG.is_file():
        return f"smg is not installed next to {sys.executable} (`pip install smg`)"
    try:
        result = subprocess.run(
            [str(SMG), "launch", "--help"], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{SMG} cannot start: {exc}"
    if result.returncode != 0:
        return f"{SMG} launch --help exited {result.returncode}: {result.stderr[-200:]!r}"
    return None


@pytest.fixture(autouse=True)
def fast_sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    reason = _smg_starts()
    if reason is not None:
        pytest.skip(reason)
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", SPEED)
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    dd("down", "--all", "--grace", "2")


def dd(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args, "--demo"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def ps() -> dict[str, dict[str, Any]]:
    result = dd("ps", "--json", "--all")
    assert result.returncode == 0, result.stderr
    return {s["id"]: s for s in json.loads(result.stdout) if not s.get("external")}


def wait_for(check: Callable[[], T], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def gateway_workers(port: int) -> list[str]:
    answer = httpx.get(f"http://127.0.0.1:{port}/workers", timeout=5)
    assert answer.status_code == 200, answer.text
    return [w["url"] for w in answer.json()["workers"]]


def processes_naming(*needles: str) -> list[int]:
    """This test's live processes (its own state folder in their environment: another test
    may have been given a port this one freed) whose command line (words joined by spaces)
    holds every one of `needles`, each as whole words."""
    state = os.environ.get("XDG_STATE_HOME")
    found = []
    for proc in live_processes():
        argv = f" {' '.join(argv_of(proc.pid))} "
        if all(f" {n} " in argv for n in needles) and (
            environ_value(proc.pid, "XDG_STATE_HOME") == state
        ):
            found.append(proc.pid)
    return found


def test_replicas_behind_the_gateway_bench_per_worker_kill_and_down() -> None:
    port = free_port()
    up = dd("up", PROFILE, "--layout", LAYOUT, "--port", str(port), "--timeout", "60")
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"ready: http://127.0.0.1:{port}" in up.stdout
    gateway_id = f"{PROFILE}-{LAYOUT}-1"
    servers = ps()
    replicas = [servers[f"{gateway_id}.replica{i}"] for i in range(2)]
    gateway = servers[gateway_id]
    assert gateway["port"] == port
    assert gateway["gpus"] == []
    assert [r["gpus"] for r in replicas] == [[0], [1]]
    assert all(s["state"] == "ready" for s in (gateway, *replicas)), servers
    urls = sorted(r["url"] for r in replicas)
    assert port not in [r["port"] for r in replicas]
    wait_for(lambda: sorted(gateway_workers(port)) == urls, 15, f"{urls} registered")

    # A benchmark through the gateway: per-worker throughput for both.
    bench = dd(
        "bench",
        "--server",
        gateway_id,
        "--concurrency",
        "8",
        "--requests",
        str(REQUESTS),
        "--output-len",
        str(OUTPUT_LEN),
        timeout=180,
    )
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "per worker through the gateway" in bench.stdout
    found = re.search(r"^run \S+ -> (\S+)$", bench.stdout, re.MULTILINE)
    assert found, bench.stdout
    run_dir = Path(found.group(1))
    shares = json.loads((run_dir / "workers.json").read_text())
    by_worker = {w["worker_addr"]: w for w in shares["workers"]}
    assert sorted(by_worker) == urls
    assert all(w["output_tokens"] > 0 and w["output_tok_s"] > 0 for w in by_worker.values())
    assert all(w["requests"] > 0 for w in by_worker.values())
    sent = sum(
        json.loads(line)["output_tokens"] or 0
        for line in (run_dir / "requests.jsonl").read_text().splitlines()
        if line.strip()
    )
    total = shares["total_output_tokens"]
    # The readings bracket the whole run, and say so: the run's own requests, plus its
    # warm-up request(s) the gateway also counted, next to what the run measured.
    assert "warm-up" in shares["scope"]
    assert shares["measured_output_tokens"] == sent
    assert shares["measured_requests"] == REQUESTS
    assert sent <= total <= sent + 2 * OUTPUT_LEN, (sent, shares)
    assert f"the run measured {sent} of these output tokens" in bench.stdout
    # Over the whole run's wall time (at least the levels' seconds), the workers' rate is
    # at most the run's measured rate scaled by the warm-up's extra tokens.
    measured_rate = shares["measured_output_tok_s"]
    assert 0 < shares["total_output_tok_s"] <= measured_rate * total / sent * 1.01, shares
    assert abs(sum(w["share"] for w in by_worker.values()) - 1) < 0.01
    # Each level's own figures per worker (no warm-up): the level's requests, all of them.
    [level] = shares["levels"]
    assert sorted(w["worker_addr"] for w in level["workers"]) == urls
    assert sum(w["requests"] for w in level["workers"]) == REQUESTS
    assert all(w["output_tokens"] > 0 for w in level["workers"])
    assert "per worker, each level" in bench.stdout
    shown = dd("runs", "show", run_dir.name)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "per worker, each level" in shown.stdout

    # A detached benchmark (as the TUI starts one): its runner writes workers.json too.
    detached = dd(
        "bench",
        "--server",
        gateway_id,
        "--concurrency",
        "4",
        "--requests",
        "8",
        "--output-len",
        str(OUTPUT_LEN),
        "--detach",
        "--json",
    )
    assert detached.returncode == 0, detached.stdout + detached.stderr
    detached_dir = Path(json.loads(detached.stdout)["run_dir"])
    followed = dd("runs", "show", detached_dir.name, "--follow", timeout=180)
    assert followed.returncode == 0, followed.stdout + followed.stderr
    detached_shares = json.loads((detached_dir / "workers.json").read_text())
    assert sorted(w["worker_addr"] for w in detached_shares["workers"]) == urls
    assert detached_shares["measured_requests"] == 8

    # SIGKILL one replica: the watcher takes it out of the gateway within 2 s.
    victim = replicas[1]
    killed = time.monotonic()
    os.kill(victim["pid"], signal.SIGKILL)
    wait_for(lambda: victim["url"] not in gateway_workers(port), 15, "the killed replica out")
    assert time.monotonic() - killed < 2.0
    assert gateway_workers(port) == [replicas[0]["url"]]
    # The other replica still serves through the gateway.
    answer = httpx.post(
        f"http://127.0.0.1:{port}/v1/completions",
        json={"model": "qwen3.6-27b", "prompt": "hello", "max_tokens": 4},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text

    # `down` stops the whole: no replica, gateway or watcher process, no listening port.
    assert processes_naming(f"--port {port}"), "the gateway is found by its port"
    assert processes_naming("console.server.gateway_watch", gateway_id), "and its watcher"
    down = dd("down", "--all", "--grace", "5")
    assert down.returncode == 0, down.stdout + down.stderr
    ports = [port, *(r["port"] for r in replicas)]

    def left() -> list[int]:
        return [
            *processes_naming(f"--port {port}"),
            *(pid for r in replicas for pid in processes_naming(f"--port {r['port']}")),
            *processes_naming("console.server.gateway_watch", gateway_id),
        ]

    with contextlib.suppress(AssertionError):
        wait_for(lambda: not left(), 30, "the gateway's processes to end")
    assert not left(), [" ".join(argv_of(pid)) for pid in left()]
    wait_for(lambda: all(port_is_free(p) for p in ports), 10, f"ports {ports} free")
    # What `down --all` did not forget (a stopped server) is stopped, none is running.
    states = {sid: s["state"] for sid, s in ps().items()}
    assert set(states.values()) <= {"stopped", "failed"}, states


def test_restart_a_replica_or_the_whole_registers_every_replica_again() -> None:
    port = free_port()
    up = dd("up", PROFILE, "--layout", LAYOUT, "--port", str(port), "--timeout", "60")
    assert up.returncode == 0, up.stdout + up.stderr
    gateway_id = f"{PROFILE}-{LAYOUT}-1"
    servers = ps()
    urls = sorted(servers[f"{gateway_id}.replica{i}"]["url"] for i in range(2))
    wait_for(lambda: sorted(gateway_workers(port)) == urls, 15, f"{urls} registered")
    old_pid = servers[f"{gateway_id}.replica1"]["pid"]

    # One replica relaunched under its id: out of the gateway while down, then back in.
    again = dd("restart", f"{gateway_id}.replica1", "--timeout", "60")
    assert again.returncode == 0, again.stdout + again.stderr
    assert ps()[f"{gateway_id}.replica1"]["pid"] != old_pid
    wait_for(lambda: sorted(gateway_workers(port)) == urls, 15, "the relaunched replica back")

    # The gateway restarts the whole: both replicas, then a fresh gateway they join.
    whole = dd("restart", gateway_id, "--timeout", "60")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    assert "relaunched with 2 replicas" in whole.stdout
    wait_for(lambda: sorted(gateway_workers(port)) == urls, 15, "both replicas in the new gateway")
    states = {sid: s["state"] for sid, s in ps().items()}
    assert states == dict.fromkeys(
        [gateway_id, *(f"{gateway_id}.replica{i}" for i in range(2))], "ready"
    )
