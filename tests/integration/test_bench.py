"""Benchmarks and campaigns against simulator processes: numbers, findings, faults, resume."""

from __future__ import annotations

import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from console.core.paths import StatePaths
from tests.conftest import REPO
from tests.simproc import SMALL, running_sim

EAGLE = [
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "x",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
    "--max-running-requests",
    "32",
]


def dd(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


@pytest.fixture(autouse=True)
def clean_servers(
    monkeypatch: pytest.MonkeyPatch, free_port_profiles: dict[str, int]
) -> Iterator[None]:
    """Fast simulators, no injected fault, and the shipped profiles moved to free ports
    (campaigns and `up` launch on a profile's own port); every server stopped after."""
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "10")
    monkeypatch.delenv("DDCONSOLE_SIM_FAULT", raising=False)
    yield
    dd("down", "--all", "--grace", "2", "--demo")


def _levels(summary: dict) -> dict[str, dict]:
    return {cell["variant"]: cell["levels"][0] for cell in summary["cells"] if cell["levels"]}


def test_demo_campaign_reproduces_the_reference_table(free_port_profiles: dict[str, int]):
    result = dd(
        "campaign", str(REPO / "campaigns" / "qwen-ddtree-budgets.toml"), "--demo", "--json"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    assert Path(summary["run_dir"]).is_dir()
    levels = _levels(summary)
    for cell in summary["cells"]:
        assert {"profile", "layout", "variant", "status", "levels"} <= set(cell)
        assert cell["status"] == "done"
        for level in cell["levels"]:
            for key in (
                "concurrency",
                "output_tok_s",
                "accept_length",
                "ttft_p50_s",
                "itl_p50_s",
                "step_time_s",
            ):
                assert key in level
    off, b15, b32, b64 = (levels[v] for v in ("off", "ddtree-b15", "ddtree-b32", "ddtree-b64"))
    # The speedup is a ratio of two rates each held to 10% below, so it may drift by their
    # sum on a loaded box (5.77x seen under -n 4 with other suites running).
    assert abs(b15["output_tok_s"] / off["output_tok_s"] - 6.5) <= 0.2 * 6.5
    assert abs(off["output_tok_s"] - 26.7) <= 2.67
    assert b15["output_tok_s"] > b32["output_tok_s"] > b64["output_tok_s"]
    # The reference table's measured columns (issue 19's calibration): output tok/s and
    # accepted tokens per step; the step is derived from them (86.5, 54.3, 62.2 ms).
    for level, accept, tok_s, step in (
        (b15, 15, 173.4, 0.0865),
        (b32, 5, 92.0, 0.0543),
        (b64, 4, 64.3, 0.0622),
    ):
        assert abs(level["accept_length"] - accept) <= 0.1 * accept
        assert abs(level["output_tok_s"] - tok_s) <= 0.1 * tok_s, (tok_s, level)
        assert abs(level["step_time_s"] - step) <= 0.1 * step
        assert level["verify_tokens_per_step"] in (16, 33, 65)
    collapse = [f for f in summary["findings"] if f["kind"] == "acceptance-collapse"]
    assert len(collapse) == 1
    assert "GDN" in collapse[0]["message"]
    assert "sibling" in collapse[0]["message"]
    assert summary["best"][0]["variant"] == "ddtree-b15"
    run = Path(summary["run_dir"])
    for name in (
        "run.json",
        "requests.jsonl",
        "telemetry-1.ddrec.gz",
        "levels.jsonl",
        "summary.json",
        "summary.csv",
        "summary.md",
    ):
        assert (run / name).exists(), name
    # Telemetry is kept in the recording format only (one file per cell's recorder).
    assert not (run / "telemetry.jsonl").exists()
    lines = (run / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 5 * 16  # five cells of 16 requests
    fingerprint = json.loads((run / "run.json").read_text())
    assert fingerprint["fingerprint"]["gpu_count"] == 8
    # Every cell listened on the user's override of the profile's port, not the shipped one.
    ports = {c["plan"]["port"] for c in fingerprint["cells"]}
    assert ports == {free_port_profiles["qwen3.6-27b"]}
    # Cell 1 is the chain baseline without overlap scheduling, cell 2 the first DDTree one.
    baseline, cell = fingerprint["cells"][1], fingerprint["cells"][2]
    assert baseline["server_info"]["speculative_algorithm"] == "DFLASH"
    assert baseline["server_info"]["disable_overlap_schedule"] is True
    assert cell["sglang_version"] == "0.5.23"
    assert cell["server_info"]["speculative_algorithm"] == "DDTREE"
    assert "--speculative-ddtree-budget" in " ".join(cell["plan"]["argv"])
    # The simulated GPUs were busy during the level (idle reads under 10%; a loaded box
    # samples fewer busy ticks, 48% seen, so the bound is wide).
    assert summary["cells"][2]["levels"][0]["gpu_util_pct"] > 25
    shown = dd("runs", "show", summary["run_id"], "--demo", "--json")
    assert json.loads(shown.stdout)["cells"] == summary["cells"]


def test_kimi_sweep_scales_near_linearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # At 5x rather than 10x: 32 streams at 10x left a busy box's simulator 12% short of its
    # model (one Python process pacing 32 requests' steps).
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "5")
    campaign = tmp_path / "kimi.toml"
    campaign.write_text(
        (REPO / "campaigns" / "kimi-concurrency.toml")
        .read_text()
        .replace("requests = 64", "duration_s = 30\nrequests = 1000")
    )
    result = dd("campaign", str(campaign), "--demo", "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    rates = {lv["concurrency"]: lv["output_tok_s"] for lv in summary["cells"][0]["levels"]}
    assert sorted(rates) == [1, 2, 4, 8, 16, 32]
    assert abs(rates[32] - 807.5) <= 0.10 * 807.5, rates
    values = [rates[c] for c in sorted(rates)]
    assert values == sorted(values)
    assert rates[32] / rates[1] > 25
    # The batching-efficiency finding says so: 32 streams give near 32x a single one.
    (batching,) = [f for f in summary["findings"] if f["kind"] == "batching-efficiency"]
    assert batching["concurrency"] == 32
    (kimi,) = batching["cells"]
    assert kimi["verdict"] == "near-linear", batching["message"]
    assert kimi["efficiency"] == pytest.approx(rates[32] / (32 * rates[1]))


def _bare_ttft(url: str, input_len: int) -> float:
    """TTFT seen by a bare socket client: the loopback HTTP round trip a client cannot avoid."""
    import socket
    from urllib.parse import urlparse

    parsed = urlparse(url)
    body = json.dumps(
        {
            "input_ids": [7] * input_len,
            "stream": True,
            "sampling_params": {"max_new_tokens": 4, "ignore_eos": True},
        }
    ).encode()
    head = (
        f"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection((parsed.hostname, parsed.port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        sock.sendall(head + body)
        data = b""
        while b"data: {" not in data:
            data += sock.recv(65536)
        first = time.perf_counter() - start
        while b"[DONE]" not in data:
            data += sock.recv(65536)
    return first


def test_measurements_match_the_simulators_ground_truth(tmp_path: Path):
    with running_sim([*SMALL, *EAGLE], tmp_path, speed=1) as sim:
        bare_before = len(sim.stats()["requests"])
        bare = [_bare_ttft(sim.url, 256) for _ in range(9)]
        bare_truth = [r["ttft_s"] for r in sim.stats()["requests"][bare_before:]]
        before = len(sim.stats()["requests"])
        result = dd(
            "bench",
            "--url",
            sim.url,
            "--concurrency",
            "1,4",
            "--requests",
            "24",
            "--input-len",
            "256",
            "--output-len",
            "96",
            "--json",
            "--demo",
            "--out",
            str(tmp_path / "runs"),
        )
        assert result.returncode == 0, result.stderr[-3000:]
        truth = sim.stats()["requests"][before:]
    single, four = json.loads(result.stdout)["cells"][0]["levels"]
    # Each level starts with one warm-up request.
    single_truth, four_truth = truth[1:25], truth[26:50]
    assert len(four_truth) == 24
    # TTFT: the simulator stamps a request when it enters the server and when its first chunk
    # leaves; a client also pays the loopback round trip, measured here with a bare socket.
    transport = statistics.median(bare) - statistics.median(bare_truth)
    # A sanity bound only (a loopback round trip, not a network); what it must be exactly
    # does not matter, since it is subtracted below.
    assert 0 <= transport < 0.05
    true_ttft = statistics.median(r["ttft_s"] for r in single_truth)
    # The client's cost on top of the truth (budget <= 1 ms) is bench/client_capacity.py's to
    # show; here the measurement must be right, not off by a step or a chunk (tens of ms), with
    # room for a busy 2-core machine's scheduling noise.
    assert abs(single["ttft_p50_s"] - transport - true_ttft) <= 0.003 + 0.05 * true_ttft, (
        single["ttft_p50_s"],
        transport,
        true_ttft,
    )
    for level, measured in ((single, single_truth), (four, four_truth)):
        span = max(r["finished_s"] for r in measured) - min(r["arrival_s"] for r in measured)
        true_tok_s = sum(r["completion_tokens"] for r in measured) / span
        assert abs(level["output_tok_s"] - true_tok_s) <= 0.02 * true_tok_s, (
            level["output_tok_s"],
            true_tok_s,
        )
        true_accept = sum(r["completion_tokens"] for r in measured) / sum(
            r["verify_ct"] for r in measured
        )
        assert abs(level["accept_length"] - true_accept) <= 0.02 * true_accept, (
            level["accept_length"],
            true_accept,
        )
        assert abs(level["accept_length_per_request"] - true_accept) <= 0.05 * true_accept
        assert level["tokens_per_chunk"] == pytest.approx(level["accept_length"], rel=0.05)


def test_chat_and_completions_endpoints(tmp_path: Path):
    # Chat takes text (token ids would go as their digits): a text dataset for it.
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(f'{{"prompt": "question {i} about caches"}}\n' for i in range(6)))
    with running_sim([*SMALL, *EAGLE], tmp_path, speed=10) as sim:
        for endpoint in ("chat", "completions"):
            text = ["--dataset", str(prompts)] if endpoint == "chat" else []
            result = dd(
                "bench",
                "--url",
                sim.url,
                "--endpoint",
                endpoint,
                *text,
                "--requests",
                "6",
                "--concurrency",
                "2",
                "--input-len",
                "64",
                "--output-len",
                "32",
                "--json",
                "--demo",
                "--out",
                str(tmp_path / "runs"),
            )
            assert result.returncode == 0, result.stderr[-2000:]
            level = json.loads(result.stdout)["cells"][0]["levels"][0]
            assert level["requests"] == 6
            assert level["errors"] == 0
            assert level["output_tokens"] == 6 * 32
            assert level["accept_length_per_request"] > 1


def test_open_loop_rate_and_http_errors_recorded(tmp_path: Path):
    with running_sim(
        [*SMALL, "--sim-fault", "http-500:0.5", "--sim-seed", "2"], tmp_path, speed=10
    ) as sim:
        result = dd(
            "bench",
            "--url",
            sim.url,
            "--rate",
            "20",
            "--requests",
            "30",
            "--input-len",
            "32",
            "--output-len",
            "16",
            "--json",
            "--demo",
            "--warmup",
            "0",
            "--out",
            str(tmp_path / "runs"),
        )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout)
    level = summary["cells"][0]["levels"][0]
    assert level["rate"] == 20
    assert level["requests"] + level["errors"] == 30
    assert 3 < level["errors"] < 27
    assert any(kind.startswith("HTTP 500") for kind in level["error_kinds"])
    rows = [
        json.loads(line)
        for line in (Path(summary["run_dir"]) / "requests.jsonl").read_text().splitlines()
    ]
    assert sum(1 for r in rows if r["error"]) == level["errors"]
    # The rate is per server second: at 10x, 20/s is 200 sends a real second. Over 29 gaps a
    # Poisson rate is within about 40% of its mean; per real second it would read 2/s.
    sends = sorted(r["send_wall"] for r in rows)
    server_rate = (len(sends) - 1) / ((sends[-1] - sends[0]) * summary["time_scale"])
    assert 10 < server_rate < 40, server_rate


def _crashy_profile(user_profiles: Path) -> None:
    """The user's qwen3.6-27b (on its free port) whose `off` variant crashes mid-stream."""
    path = user_profiles / "qwen3.6-27b.toml"
    text = path.read_text()
    text += '\n[variants.off.env]\nDDCONSOLE_SIM_FAULT = "crash-mid-stream:40"\n'
    path.write_text(text)


def test_a_crash_mid_level_fails_the_cell_and_the_campaign_goes_on(
    tmp_path: Path, user_profiles: Path
):
    _crashy_profile(user_profiles)
    campaign = tmp_path / "c.toml"
    campaign.write_text(
        'name = "crash"\nprofile = "qwen3.6-27b"\nlayouts = ["tp1"]\n'
        'variants = ["off", "ddtree-b15"]\nconcurrency = [4]\nrequests = 8\n'
        "input_len = 64\noutput_len = 64\nwarmup = 0\n"
    )
    result = dd("campaign", str(campaign), "--demo", "--json")
    # A failed level fails the campaign (issue 16): non-zero, the reason on its last line,
    # while the other cell still ran and the summary is still printed.
    assert result.returncode == 1, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("campaign failed: "), last
    assert "level 1 (concurrency 4)" in last
    summary = json.loads(result.stdout)
    crashed, healthy = summary["cells"]
    assert crashed["status"] == "failed"
    assert "CUDA error" in crashed["reason"]
    level = crashed["levels"][0]
    # The four requests streaming when the server died are errors (the stream broke); the
    # ones sent after found the dying server still accepting (SGLang's leader logs and kills
    # its tree before it exits: disconnected, reset) or gone (refused). Nothing is lost or counted
    # twice.
    kinds = level["error_kinds"]
    broken = sum(n for kind, n in kinds.items() if kind.startswith("stream broken"))
    assert broken == 4, kinds
    later = [kind for kind in kinds if not kind.startswith("stream broken")]
    assert all(k == "server disconnected" or k.startswith("connection") for k in later), kinds
    assert level["requests"] + level["errors"] == 8
    assert healthy["status"] == "done"
    assert healthy["levels"][0]["requests"] == 8
    assert any(f["kind"] == "cell-failed" for f in summary["findings"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_campaign_resumes_to_completion(tmp_path: Path, sig: signal.Signals):
    campaign = tmp_path / "c.toml"
    campaign.write_text(
        'name = "resume"\nprofile = "qwen3.6-27b"\nlayouts = ["tp1"]\n'
        'variants = ["off", "ddtree-b15"]\nconcurrency = [2]\nrequests = 12\n'
        "input_len = 64\noutput_len = 48\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "campaign", str(campaign), "--demo"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
        env={**os.environ, "DDCONSOLE_SIM_SPEED": "4"},
    )
    runs = StatePaths.for_mode(True).runs
    deadline = time.monotonic() + 60
    requests_file = None
    while time.monotonic() < deadline:
        found = list(runs.glob("*/requests.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= 3:
            requests_file = found[0]
            break
        time.sleep(0.1)
    assert requests_file is not None
    proc.send_signal(sig)
    code = proc.wait(timeout=60)
    assert code == (130 if sig == signal.SIGINT else -9)
    kept = len(requests_file.read_text().splitlines())
    assert kept >= 3
    run_id = requests_file.parent.name
    listed = json.loads(dd("runs", "list", "--demo", "--json").stdout)
    assert listed[0]["status"] == "interrupted"
    resumed = dd("campaign", str(campaign), "--resume", run_id, "--demo", "--json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout)
    assert summary["status"] == "done"
    assert [c["status"] for c in summary["cells"]] == ["done", "done"]
    assert all(c["levels"][0]["requests"] == 12 for c in summary["cells"])
    # Nothing earlier was lost: the first attempt's requests are still on disk.
    rows = requests_file.read_text().splitlines()
    assert len(rows) >= kept
    assert dd("ps", "--demo", "--json").stdout.count('"ready"') == 0


def test_unwritable_results_directory_is_refused_up_front(tmp_path: Path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a folder")
    with running_sim(SMALL, tmp_path) as sim:
        result = dd(
            "bench", "--url", sim.url, "--requests", "2", "--demo", "--out", str(blocked / "runs")
        )
    assert result.returncode == 2
    assert f"results directory {blocked / 'runs'} is not writable" in result.stderr


def test_results_directory_filling_up_stops_cleanly(tmp_path: Path):
    with running_sim(SMALL, tmp_path, speed=20) as sim:

        def limit() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))

        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "console",
                "bench",
                "--url",
                sim.url,
                "--requests",
                "400",
                "--concurrency",
                "8",
                "--input-len",
                "16",
                "--output-len",
                "64",
                "--demo",
                "--out",
                str(tmp_path / "runs"),
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            preexec_fn=limit,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 1
    assert "stopped: cannot write to" in proc.stderr
    assert "File too large" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_runs_compare_and_sglang_import(tmp_path: Path):
    out = str(tmp_path / "runs")
    with running_sim([*SMALL, *EAGLE], tmp_path, speed=10) as sim:
        first = json.loads(
            dd(
                "bench",
                "--url",
                sim.url,
                "--requests",
                "6",
                "--concurrency",
                "1,2",
                "--input-len",
                "32",
                "--output-len",
                "32",
                "--json",
                "--demo",
                "--out",
                out,
                "--name",
                "first",
            ).stdout
        )
        second = json.loads(
            dd(
                "bench",
                "--url",
                sim.url,
                "--requests",
                "6",
                "--concurrency",
                "1,2",
                "--input-len",
                "32",
                "--output-len",
                "64",
                "--json",
                "--demo",
                "--out",
                out,
                "--name",
                "second",
            ).stdout
        )
    compared = json.loads(
        dd(
            "runs", "compare", first["run_id"], second["run_id"], "--json", "--demo", "--out", out
        ).stdout
    )
    assert [row["concurrency"] for row in compared["rows"]] == [1, 2]
    for row in compared["rows"]:
        assert row["output_tok_s_a"] is not None
        assert row["output_tok_s_delta_pct"] is not None
    text = dd("runs", "compare", first["run_id"], second["run_id"], "--demo", "--out", out)
    assert "TOK/S A / B" in text.stdout
    sglang_jsonl = tmp_path / "sglang.jsonl"
    sglang_jsonl.write_text(
        json.dumps(
            {
                "backend": "sglang",
                "max_concurrency": 2,
                "request_rate": float("inf"),
                "completed": 6,
                "duration": 1.5,
                "total_output_tokens": 192,
                "output_throughput": 128.0,
                "request_throughput": 4.0,
                "median_ttft_ms": 20.0,
                "p99_ttft_ms": 30.0,
                "median_tpot_ms": 5.0,
                "p99_tpot_ms": 6.0,
                "median_itl_ms": 9.0,
                "accept_length": 3.1,
                "server_info": {"served_model_name": SMALL[1]},
            }
        )
        + "\n"
    )
    imported = dd("runs", "import", str(sglang_jsonl), "--json", "--demo", "--out", out)
    assert imported.returncode == 0, imported.stderr
    run = json.loads(imported.stdout)
    level = run["cells"][0]["levels"][0]
    assert level["output_tok_s"] == 128.0
    assert level["itl_p50_s"] == pytest.approx(0.005)
    listing = json.loads(dd("runs", "list", "--json", "--demo", "--out", out).stdout)
    assert {r["kind"] for r in listing} == {"bench", "sglang-bench"}


def test_bench_against_a_managed_server():
    up = dd("up", "qwen3.6-27b", "-l", "tp1", "-v", "mtp", "--json", "--demo")
    assert up.returncode == 0, up.stderr
    server = json.loads(up.stdout)
    result = dd(
        "bench",
        "--server",
        server["id"],
        "--requests",
        "4",
        "--input-len",
        "32",
        "--output-len",
        "32",
        "--json",
        "--demo",
    )
    assert result.returncode == 0, result.stderr
    cell = json.loads(result.stdout)["cells"][0]
    assert (cell["profile"], cell["layout"], cell["variant"]) == ("qwen3.6-27b", "tp1", "mtp")
    assert cell["levels"][0]["verify_tokens_per_step"] == 4
    stopped = dd("bench", "--server", "nope", "--demo")
    assert stopped.returncode == 2
    assert "unknown server 'nope'" in stopped.stderr
    httpx.get(server["url"] + "/ready")
