"""Every failure the simulator can produce, read back the way ddconsole reads a real SGLang
server: its exit status and log through the status classification (`up`, `ps`, the TUI) and
through `ddconsole diagnose`, which must agree on the kind. The simulator writes SGLang
0.5.23's texts (console/sim/crashes.py); the classifier must not be tuned to it, so every kind
here is also checked on the real texts of tests/fixtures/sglang-0.5.23/corpus.toml."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

import httpx
import pytest

from console.core.net import free_port
from console.server.diagnose import log_failure
from console.server.milestones import Phase
from console.server.status import startup_phase
from tests.conftest import run_cli_subprocess
from tests.sglang_corpus import entries
from tests.simproc import QWEN, SMALL, SimProcess, start_sim, stop_sim, wait_ready

CORPUS_KINDS = {entry.kind for entry in entries("failure")}
SIGKILL = -signal.SIGKILL
DP_ATTENTION = [*SMALL, "--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"]


def _ended(sim: SimProcess, timeout: float = 60) -> int:
    try:
        return sim.proc.wait(timeout=timeout)
    finally:
        stop_sim(sim)


def _check(sim: SimProcess, code: int, kind: str, exit_status: int) -> None:
    assert kind in CORPUS_KINDS
    log = sim.log()
    assert code == exit_status, log
    status = log_failure(str(sim.log_path), code, stop_requested=False)
    assert status is not None, log
    assert status.kind == kind, (status, log)
    assert "SIGKILL" not in status.reason
    result = run_cli_subprocess("diagnose", str(sim.log_path), "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["failure"]["kind"] == kind
    assert report["failure"]["reason"] == status.reason
    assert log.splitlines()[report["failure"]["line_number"] - 1] == report["failure"]["line"]


@pytest.mark.parametrize(
    ("args", "kind", "exit_status"),
    [
        ([*SMALL, "--tp-size", "2", "--sim-fault", "crash-at-load:oom"], "cuda-oom", SIGKILL),
        ([*SMALL, "--tp-size", "2", "--sim-fault", "crash-at-load:kv-oom"], "kv-oom", SIGKILL),
        ([*QWEN, "--sim-fault", "crash-at-load:hybrid-oom"], "kv-oom", SIGKILL),
        ([*SMALL, "--tp-size", "2", "--sim-fault", "crash-at-load:nccl"], "nccl", SIGKILL),
        ([*SMALL, "--sim-fault", "crash-at-load:import"], "import-error", 1),
        ([*SMALL, "--sim-fault", "crash-at-load:notfound"], "model-not-found", 1),
        ([*SMALL, "--sim-fault", "crash-at-load:gated"], "gated-repo", 1),
        ([*SMALL, "--sim-fault", "crash-at-load:version"], "version-mismatch", 1),
        # DP attention's ports: the leader's PortArgs.init_new raises before any child starts
        # (sglang 0.5.23 srt/entrypoints/engine.py:1184): a traceback, exit 1.
        (
            [*DP_ATTENTION, "--sim-fault", "crash-at-load:dp-port"],
            "port-in-use",
            1,
        ),
        ([*SMALL, "--sim-fault", "crash-at-load:badflag"], "bad-flag", 2),
        ([*QWEN, "--speculative-algorithm", "DFLASH"], "config-error", 1),
        ([*SMALL, "--no-such-flag", "1"], "bad-flag", 2),
    ],
    ids=[
        "oom",
        "kv-oom",
        "hybrid-oom",
        "nccl",
        "import",
        "notfound",
        "gated",
        "version",
        "dp-port",
        "badflag",
        "dflash-without-draft",
        "unknown-flag",
    ],
)
def test_load_failures_read_back_with_the_right_kind(
    tmp_path: Path, args: list[str], kind: str, exit_status: int
) -> None:
    sim = start_sim(args, tmp_path=tmp_path, speed=20)
    _check(sim, _ended(sim), kind, exit_status)


def test_port_in_use_reads_back_as_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        sim = start_sim(SMALL, tmp_path=tmp_path, speed=20, port=port)
        code = _ended(sim)
    _check(sim, code, "port-in-use", 3)


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("runtime-oom:8", "runtime-oom"),
        ("prefill-oom", "runtime-oom"),
        ("crash-mid-stream:8", "cuda-error"),
    ],
    ids=["decode-oom", "prefill-oom", "crash-mid-stream"],
)
def test_failures_while_serving_read_back_with_the_right_kind(
    tmp_path: Path, fault: str, kind: str
) -> None:
    sim = start_sim([*SMALL, "--sim-fault", fault], tmp_path=tmp_path, speed=20)
    try:
        wait_ready(sim)
        body = {
            "text": "Tell me a long story.",
            "sampling_params": {"max_new_tokens": 64, "ignore_eos": True},
            "stream": True,
        }
        # The server dies under the request: any answer, or none, will do.
        try:
            httpx.post(f"{sim.url}/generate", json=body, timeout=30)
        except httpx.HTTPError:
            pass
    except BaseException:
        stop_sim(sim)
        raise
    _check(sim, _ended(sim), kind, SIGKILL)


def test_the_cuda_graph_phase_shows_during_capture(tmp_path: Path) -> None:
    """The phase a starting server shows is read from its log as it grows (status.startup_phase,
    what `ps`, `up` and the TUI show): while the target decode graph is captured it reads so.
    The `hold-capture` fault keeps the capture going until the phase was seen."""
    release = tmp_path / "release"
    sim = start_sim([*SMALL, "--sim-fault", f"hold-capture:{release}"], tmp_path=tmp_path)
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while sim.proc.poll() is None and time.monotonic() < deadline:
            phase, label = startup_phase(str(sim.log_path))
            if label and (not seen or seen[-1] != label):
                seen.append(label)
            if label == "capturing CUDA graph: target decode":
                release.touch()
            if phase is Phase.WARMING or phase is Phase.READY:
                break
            time.sleep(0.02)
    finally:
        stop_sim(sim)
    assert "capturing CUDA graph: target decode" in seen, seen
    assert seen.index("capturing CUDA graph: target decode") < seen.index("HTTP up, warming up")


def test_up_prints_the_same_diagnosis(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed `up --demo`: the reason, the phase reached and the failure's line come from
    the code `ddconsole diagnose` runs, and `ps` reads the same reason."""
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    monkeypatch.setenv("DDCONSOLE_SIM_FAULT", "crash-at-load:kv-oom")
    up = run_cli_subprocess(
        "up", "qwen3.6-27b", "-l", "tp1", "--port", str(free_port()), "--json", "--demo"
    )
    try:
        assert up.returncode == 1, up.stderr
        status = json.loads(up.stdout)
        assert status["failure_kind"] == "kv-oom"
        diagnosed = run_cli_subprocess("diagnose", status["log_path"], "--json")
        report = json.loads(diagnosed.stdout)
        assert report["failure"]["reason"] == status["reason"]
        assert f"FAILED: {status['reason']}" in up.stderr
        assert f"  reached: {report['reached']} (" in up.stderr
        assert f"  at line {report['failure']['line_number']} of the log:" in up.stderr
        assert f"  | {report['failure']['line']}" in up.stderr
        listed = json.loads(run_cli_subprocess("ps", "--json", "--demo").stdout)
        (row,) = [s for s in listed if s.get("id") == status["id"]]
        assert row["reason"] == status["reason"]
    finally:
        run_cli_subprocess("down", "--all", "--grace", "2", "--demo")
