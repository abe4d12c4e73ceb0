"""ddconsole's readers of SGLang's HTTP side against the simulator over real sockets: the
/metrics 404 hint, lazy series, priority gauges, the admin key on /flush_cache, reasoning
tokens in chat timing, and secrets from /server_info kept out of run files."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from console.bench.client import Endpoint, run_request
from console.bench.levels import LevelSpec, Target, run_level
from console.bench.workload import Prompt, Workload
from console.telemetry.poller import Poller
from console.telemetry.samples import ServerSample, SourceState, SourceStatus
from console.telemetry.sglang_source import NO_METRICS_ROUTE, SglangSource
from console.telemetry.store import TimeSeriesStore
from tests.conftest import REPO, run_cli_subprocess, shipped_profile_on_port
from tests.simproc import QWEN, SMALL, running_sim

DDTREE = [
    "--speculative-algorithm",
    "DDTREE",
    "--speculative-draft-model-path",
    "z-lab/Qwen3.6-27B-DFlash",
    "--speculative-ddtree-budget",
    "15",
]


async def _poll(url: str, times: int, gap: float) -> list[tuple[SourceStatus, ServerSample | None]]:
    store = TimeSeriesStore(100)
    poller = Poller(store)
    out = []
    async with httpx.AsyncClient() as client:
        source = SglangSource("x", url, client)
        poller.add(source)
        for _ in range(times):
            await poller.poll_once(source)
            sample = store.latest(source.name)
            assert sample is None or isinstance(sample, ServerSample)
            out.append((store.statuses()[source.name], sample))
            await asyncio.sleep(gap)
    return out


def test_a_server_without_enable_metrics_reads_the_hint(tmp_path: Path):
    with running_sim(SMALL, tmp_path, metrics=False) as sim:
        status, _ = asyncio.run(_poll(sim.url, 1, 0))[-1]
    assert status.state is SourceState.UNAVAILABLE
    assert status.reason == NO_METRICS_ROUTE
    assert status.reason == "no /metrics (start SGLang with --enable-metrics)"


def test_a_non_speculative_server_has_no_verify_rate(tmp_path: Path):
    with running_sim(SMALL, tmp_path, speed=20) as sim:
        with sim.client() as client:
            client.post(
                "/generate",
                json={"input_ids": [1] * 8, "sampling_params": {"max_new_tokens": 64}},
            )
        assert "sglang:spec_verify_calls_total" not in httpx.get(f"{sim.url}/metrics").text
        status, sample = asyncio.run(_poll(sim.url, 2, 0.2))[-1]
    assert status.state is SourceState.OK
    assert sample is not None
    assert sample.spec_verify_s is None  # unknown, shown as "-": not a rate of 0
    assert sample.accept_length is None


def test_priority_gauges_are_counted_once(tmp_path: Path):
    args = [*SMALL, "--enable-priority-scheduling", "--max-running-requests", "3"]
    with running_sim(args, tmp_path, speed=2) as sim:

        def send(priority: int) -> None:
            with httpx.Client(base_url=sim.url, timeout=120) as client:
                client.post(
                    "/generate",
                    json={
                        "input_ids": [1] * 8,
                        "priority": priority,
                        "sampling_params": {"max_new_tokens": 600, "ignore_eos": True},
                    },
                )

        threads = [threading.Thread(target=send, args=(p,)) for p in (1, 1, 2, 3)]
        for thread in threads:
            thread.start()
        try:
            seen: list[tuple[float | None, float | None]] = []
            for _ in range(100):
                _, sample = asyncio.run(_poll(sim.url, 1, 0.1))[-1]
                if sample is not None:
                    seen.append((sample.running, sample.queued))
                    if sample.running == 3 and sample.queued == 1:
                        break
        finally:
            for thread in threads:
                thread.join(timeout=300)
    # 3 running (the cap) and 1 queued: the priority="" totals, not totals plus parts. Before
    # the scheduler admits them all a poll may see fewer running and more queued; never more
    # than the 4 requests sent, which counting the priority parts twice would show.
    assert (3, 1) in seen, seen
    assert all((r or 0) <= 3 and (r or 0) + (q or 0) <= 4 for r, q in seen), seen


def _level(flush: bool = True) -> LevelSpec:
    return LevelSpec(0, 1, None, 2, None, warmup=0, flush_cache=flush)


async def _run_level(target: Target) -> str | None:
    workload = Workload(input_len=16, output_len=8)
    async with httpx.AsyncClient(timeout=60) as client:
        outcome = await run_level(
            client,
            target,
            Endpoint.GENERATE,
            workload,
            _level(),
            on_result=lambda index, result: None,
            stop=asyncio.Event(),
        )
    assert all(r.error is None for r in outcome.results), [r.error for r in outcome.results]
    return outcome.flush_error


def test_flush_uses_the_admin_key_and_reports_a_refusal(tmp_path: Path):
    args = [*SMALL, "--api-key", "user-key-1", "--admin-api-key", "admin-key-1"]
    user = {"Authorization": "Bearer user-key-1"}
    with running_sim(args, tmp_path, speed=20) as sim:
        good = Target(sim.url, user, admin_headers={"Authorization": "Bearer admin-key-1"})
        assert asyncio.run(_run_level(good)) is None
        assert "Cache flushed successfully!" in sim.log()
        wrong = Target(sim.url, user, admin_headers={"Authorization": "Bearer nope"})
        refused = asyncio.run(_run_level(wrong))
        # Without an admin key ddconsole sends the API key, which SGLang refuses here.
        unkeyed = asyncio.run(_run_level(Target(sim.url, user)))
    assert refused == "/flush_cache: HTTP 401 (the server refused the admin key)"
    assert unkeyed == "/flush_cache: HTTP 401 (the server refused the API key)"


def test_chat_ttft_counts_the_first_reasoning_token(tmp_path: Path):
    prompt = Prompt(input_ids=None, text="think about it " * 8, input_len=32, output_len=64)
    with running_sim([*QWEN, *DDTREE, "--reasoning-parser", "qwen3"], tmp_path, speed=5) as sim:

        async def measure() -> tuple[float | None, float | None, int | None]:
            async with httpx.AsyncClient(timeout=60) as client:
                result = await run_request(
                    client, sim.url, Endpoint.CHAT, prompt, time_scale=sim.speed
                )
            assert result.error is None, result.error
            return result.ttft_s, result.e2e_s, result.output_tokens

        ttft, e2e, tokens = asyncio.run(measure())
        truth = sim.stats()["requests"][-1]
    assert tokens == 64
    assert ttft is not None
    assert e2e is not None
    # The first token is a thinking token, sent with the prefill: the client's TTFT is the
    # server's (within scheduling noise), far ahead of the answer, which starts after 3/4
    # of the decode. Both sides on the server's timeline, so a busy box's delays in the
    # client cannot flip it.
    assert ttft < truth["ttft_s"] + 0.5 * (truth["e2e_s"] - truth["ttft_s"])


def test_run_json_never_holds_the_ssl_keyfile_password(tmp_path: Path):
    secret = "pw-ssl-93b1e7"
    with running_sim([*SMALL, "--ssl-keyfile-password", secret], tmp_path, speed=20) as sim:
        info = httpx.get(f"{sim.url}/server_info").json()
        assert info["ssl_keyfile_password"] == secret  # served in clear, as real SGLang does
        runs = tmp_path / "runs"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "console",
                "bench",
                "--url",
                sim.url,
                "--requests",
                "2",
                "--concurrency",
                "1",
                "--output-len",
                "8",
                "--json",
                "--demo",
                "--out",
                str(runs),
            ],
            capture_output=True,
            text=True,
            env={**os.environ},
            cwd=REPO,
            timeout=120,
            check=False,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    files = [p for p in runs.rglob("*") if p.is_file()]
    run_json = next(p for p in files if p.name == "run.json")
    cell = json.loads(run_json.read_text())["cells"][0]
    assert cell["server_info"]["ssl_keyfile_password"] == "***"
    assert cell["server_info"]["max_total_tokens"] == info["max_total_tokens"]
    leaked = [str(p) for p in files if secret in p.read_text(errors="replace")]
    assert leaked == []
    assert secret not in result.stdout + result.stderr


@pytest.mark.parametrize("flag", ["--ssl-keyfile-password", "--admin-api-key"])
def test_launch_command_secrets_are_masked(flag: str):
    from console.bench.campaign import redact_server_info

    info = {"launch_command": f"--model-path m {flag} s3cret-1 --port 1", "admin_api_key": None}
    clean = redact_server_info(info)
    assert clean is not None
    assert clean["launch_command"] == f"--model-path m {flag} *** --port 1"


def test_profile_admin_key_reaches_the_server_and_the_flush(
    user_profiles: Path, monkeypatch: pytest.MonkeyPatch
):
    text = shipped_profile_on_port("qwen3.6-27b")
    text = text.replace(
        "[server]\n",
        '[server]\napi_key_env = "DDCONSOLE_TEST_KEY"\n'
        'admin_api_key_env = "DDCONSOLE_TEST_ADMIN_KEY"\n',
        1,
    )
    (user_profiles / "qwen-admin.toml").write_text(text)
    monkeypatch.setenv("DDCONSOLE_TEST_KEY", "user-key-42")
    monkeypatch.setenv("DDCONSOLE_TEST_ADMIN_KEY", "admin-key-42")
    monkeypatch.setenv("DDCONSOLE_SIM_SPEED", "20")
    env = os.environ.copy()
    up = run_cli_subprocess(
        "--demo",
        "up",
        "qwen-admin",
        "--layout",
        "tp1",
        "--variant",
        "off",
        "--json",
        env=env,
        timeout=90,
    )
    assert up.returncode == 0, up.stderr
    server = json.loads(up.stdout)
    try:
        flush = httpx.post(
            f"{server['url']}/flush_cache",
            headers={"Authorization": "Bearer admin-key-42"},
            timeout=30,
        )
        assert flush.status_code == 200  # the server got the admin key from the variable

        def bench(admin_key: str) -> dict[str, object]:
            result = run_cli_subprocess(
                "--demo",
                "bench",
                "--server",
                server["id"],
                "--requests",
                "2",
                "--concurrency",
                "1",
                "--output-len",
                "8",
                "--flush-cache",
                "--json",
                env={**env, "DDCONSOLE_TEST_ADMIN_KEY": admin_key},
                timeout=120,
            )
            assert result.returncode == 0, result.stderr[-2000:]
            found = re.search(r"run \S+ -> (\S+)", result.stderr)
            assert found, result.stderr
            levels = Path(found.group(1)) / "levels.jsonl"
            line: dict[str, object] = json.loads(levels.read_text().splitlines()[-1])
            line["stderr"] = result.stderr
            return line

        good = bench("admin-key-42")
        assert good["flush_error"] is None
        refused = bench("wrong-admin-key")
        message = "/flush_cache: HTTP 401 (the server refused the admin key)"
        assert refused["flush_error"] == message
        assert message in str(refused["stderr"])  # announced, not only recorded
    finally:
        run_cli_subprocess("--demo", "down", "--all", "--grace", "2", env=env)
