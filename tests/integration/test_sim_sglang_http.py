"""The simulator's HTTP side against real SGLang 0.5.23, over loopback sockets: lazy metric
series, priority gauges, /server_info values, /flush_cache auth, reasoning streams."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.simproc import MTP, QWEN, SMALL, running_sim


def families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def generate(client: httpx.Client, tokens: int, **extra: Any) -> None:
    reply = client.post(
        "/generate",
        json={
            "input_ids": [1] * 8,
            "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True},
            **extra,
        },
    )
    assert reply.status_code == 200, reply.text


def test_no_metrics_route_without_enable_metrics(tmp_path: Path):
    # sglang 0.5.23 srt/entrypoints/http_server.py:313-316: the route is mounted only then.
    with running_sim(SMALL, tmp_path, metrics=False) as sim, sim.client() as client:
        reply = client.get("/metrics")
        assert reply.status_code == 404
        assert reply.json() == {"detail": "Not Found"}  # FastAPI's answer to an unknown path
        assert client.get("/ready").status_code == 200


def test_series_appear_at_first_use(tmp_path: Path):
    with (
        # Speed 0 runs the simulator on a virtual clock that only simulated work moves, so the
        # idle path's 30 s (which would publish the gauges, sglang 0.5.23
        # srt/managers/scheduler_components/metrics_reporter.py:1476-1532) never come however
        # slowly this test runs.
        running_sim([*SMALL, "--skip-server-warmup"], tmp_path, speed=0) as sim,
        sim.client() as client,
    ):
        # Nothing served yet: only the startup constant (emit_constants, sglang 0.5.23
        # srt/observability/metrics_collector.py:1769-1782) and the effective prefill tokens,
        # every mode pre-seeded at 0 (:1051-1054).
        before = families(client.get("/metrics").text)
        assert set(before) == {"sglang:max_total_num_tokens", "sglang:prefill_effective_tokens"}
        assert {s.value for s in before["sglang:prefill_effective_tokens"].samples} == {0.0}
        generate(client, 48)
        after = families(client.get("/metrics").text)
        # A non-speculative server never creates spec_verify_calls_total (:2111-2112) ...
        assert "sglang:spec_verify_calls" not in after
        # ... nor a realtime mode that never moved (:1558-1572).
        modes = {s.labels["mode"] for s in after["sglang:realtime_tokens"].samples}
        assert modes == {"prefill_compute", "decode"}
        for name in ("sglang:num_running_reqs", "sglang:gen_throughput", "sglang:token_usage"):
            assert name in after, name
        assert all(s.value >= 0 for s in after["sglang:generation_tokens"].samples)


def test_queue_time_is_a_scheduler_histogram(tmp_path: Path):
    with running_sim(SMALL, tmp_path, speed=20) as sim, sim.client() as client:
        generate(client, 4)
        queue = families(client.get("/metrics").text)["sglang:queue_time_seconds"]
    buckets = [s for s in queue.samples if s.name.endswith("_bucket")]
    # Scheduler labels and buckets (sglang 0.5.23 srt/observability/metrics_collector.py:837-882).
    assert "tp_rank" in buckets[0].labels
    bounds = [s.labels["le"] for s in buckets][:5]
    assert bounds == ["0.0", "0.001", "0.005", "0.01", "0.05"]


def test_priority_scheduling_publishes_a_total_and_each_priority(tmp_path: Path):
    args = [*SMALL, "--enable-priority-scheduling", "--max-running-requests", "2"]
    with running_sim(args, tmp_path, speed=5) as sim:

        def send(priority: int) -> None:
            with httpx.Client(base_url=sim.url, timeout=60) as client:
                generate(client, 400, priority=priority)

        # The two of priority 1 first, running before the others are sent: which requests
        # run is then known whatever the box's load does to the threads' order.
        threads = [threading.Thread(target=send, args=(p,)) for p in (1, 1, 2, 2)]
        for thread in threads[:2]:
            thread.start()
        try:
            running: list[Any] = []
            for _ in range(200):
                text = httpx.get(f"{sim.url}/metrics", timeout=10).text
                running = families(text)["sglang:num_running_reqs"].samples
                total = [s.value for s in running if s.labels["priority"] == ""]
                if total and total[0] == 2:
                    break
                threading.Event().wait(0.05)
            for thread in threads[2:]:
                thread.start()
        finally:
            for thread in threads:
                if thread.ident is not None:  # started
                    thread.join(timeout=120)
    by_priority = {s.labels["priority"]: s.value for s in running}
    # priority="" is the total; the parts are the same requests again
    # (sglang 0.5.23 srt/observability/metrics_collector.py:1389-1390, 1417-1430).
    assert by_priority[""] == 2
    assert sum(v for k, v in by_priority.items() if k) == 2
    assert set(by_priority) >= {"", "1"}


def test_server_info_values_as_real(tmp_path: Path):
    args = [*MTP, "--dp-size", "2", "--api-key", "k-1234", "--ssl-keyfile-password", "pw-5678"]
    with (
        running_sim(args, tmp_path, speed=20) as sim,
        sim.client(headers={"Authorization": "Bearer k-1234"}) as client,
    ):
        info = client.get("/server_info").json()
    assert info["status"] == "ready"  # sglang 0.5.23 srt/managers/scheduler.py:1944
    # NEXTN resolves to EAGLE (srt/arg_groups/speculative_hook.py:109-116).
    assert info["speculative_algorithm"] == "EAGLE"
    # world_size = dp * tp * pp (srt/server_args.py:581-589).
    assert [s["world_size"] for s in info["internal_states"]] == [2, 2]
    # The bare arguments, keys in clear (srt/server_args.py:711-719).
    assert info["launch_command"].startswith("--model-path Qwen/Qwen3.6-27B ")
    assert "--api-key k-1234" in info["launch_command"]
    assert "--sim-speed" not in info["launch_command"]
    assert info["api_key"] == "k-1234"
    assert info["ssl_keyfile_password"] == "pw-5678"


def test_flush_cache_takes_only_the_admin_key_when_set(tmp_path: Path):
    # ADMIN_OPTIONAL (sglang 0.5.23 srt/entrypoints/http_server.py:1025-1026,
    # srt/utils/auth.py:125-137).
    args = [*SMALL, "--api-key", "user-key", "--admin-api-key", "admin-key"]
    with running_sim(args, tmp_path, speed=20) as sim:

        def flush(key: str | None) -> int:
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            return httpx.post(f"{sim.url}/flush_cache", headers=headers, timeout=30).status_code

        assert flush("user-key") == 401
        assert flush(None) == 401
        assert flush("admin-key") == 200
        # Ordinary routes still take the API key, not the admin key.
        with sim.client(headers={"Authorization": "Bearer user-key"}) as client:
            generate(client, 2)
        with sim.client(headers={"Authorization": "Bearer admin-key"}) as client:
            assert client.get("/v1/models").status_code == 401
    with running_sim([*SMALL, "--admin-api-key", "admin-key"], tmp_path, speed=20) as sim:
        # Only an admin key: ordinary routes are open, /flush_cache wants the admin key.
        assert httpx.get(f"{sim.url}/v1/models", timeout=10).status_code == 200
        assert httpx.post(f"{sim.url}/flush_cache", timeout=10).status_code == 401
    with running_sim([*SMALL, "--api-key", "user-key"], tmp_path, speed=20) as sim:
        # Only an API key: it unlocks /flush_cache too.
        headers = {"Authorization": "Bearer user-key"}
        reply = httpx.post(f"{sim.url}/flush_cache", headers=headers, timeout=10)
        assert reply.status_code == 200


def test_chat_stream_with_a_reasoning_parser(tmp_path: Path):
    with (
        running_sim([*QWEN, "--reasoning-parser", "qwen3"], tmp_path, speed=20) as sim,
        sim.client() as client,
    ):
        # sglang 0.5.23 srt/entrypoints/http_server.py:812-850
        assert client.get("/model_info").json()["reasoning_parser"] == "qwen3"
        with client.stream(
            "POST",
            "/v1/chat/completions",
            json={
                "messages": [{"role": "user", "content": "why?"}],
                "max_tokens": 40,
                "stream": True,
                "ignore_eos": True,
                "stream_options": {"include_usage": True},
            },
        ) as response:
            events = [
                json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")
            ]
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    # Thinking first, in reasoning_content (sglang 0.5.23
    # srt/entrypoints/openai/serving_chat.py:973-1000), then the answer in content.
    kinds = [
        "reasoning" if d.get("reasoning_content") else "content" if d.get("content") else None
        for d in deltas
    ]
    shown = [k for k in kinds if k]
    assert shown[0] == "reasoning"
    assert "content" in shown
    assert shown == sorted(shown, key=lambda k: k == "content")
    assert all("reasoning_content" in d for d in deltas)
    thinking = "".join(d.get("reasoning_content") or "" for d in deltas)
    answer = "".join(d.get("content") or "" for d in deltas)
    usage = events[-1]["usage"]
    assert usage["completion_tokens"] == 40
    assert len(thinking.split()) == usage["reasoning_tokens"] > 0
    assert len(thinking.split()) + len(answer.split()) == 40


def test_idle_schedulers_publish_zeros_every_30_s(tmp_path: Path):
    # The idle path logs stats 30 s after the last log even with nothing served, with
    # gen_throughput 0 (sglang 0.5.23 srt/managers/scheduler_components/metrics_reporter.py
    # :1476-1532). At --sim-speed 40, 30 simulated seconds pass in under a second.
    with (
        running_sim([*SMALL, "--skip-server-warmup"], tmp_path, speed=40) as sim,
        sim.client() as client,
    ):
        found: dict[str, Any] = {}
        for _ in range(200):
            found = families(client.get("/metrics").text)
            if "sglang:num_running_reqs" in found:
                break
            threading.Event().wait(0.05)
    assert found["sglang:num_running_reqs"].samples[0].value == 0
    assert found["sglang:gen_throughput"].samples[0].value == 0
    assert "sglang:realtime_tokens" not in found  # nothing was processed
