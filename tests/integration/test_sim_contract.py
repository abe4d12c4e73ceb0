"""The simulator's HTTP contract over real loopback sockets, endpoint by endpoint."""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.simproc import QWEN, SMALL, running_sim

DDTREE = [
    *QWEN,
    "--speculative-algorithm",
    "DDTREE",
    "--speculative-draft-model-path",
    "z-lab/Qwen3.6-27B-DFlash",
    "--speculative-ddtree-budget",
    "15",
    "--max-running-requests",
    "32",
]


def events(response: httpx.Response) -> list[str]:
    return [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]


@pytest.fixture(scope="module")
def ddtree_sim(tmp_path_factory: pytest.TempPathFactory):
    with running_sim(DDTREE, tmp_path_factory.mktemp("ddtree"), speed=20) as sim:
        yield sim


@pytest.fixture(scope="module")
def plain_sim(tmp_path_factory: pytest.TempPathFactory):
    with running_sim(SMALL, tmp_path_factory.mktemp("plain"), speed=20) as sim:
        yield sim


def test_native_stream_chunks_and_final_meta(ddtree_sim):
    with (
        ddtree_sim.client() as client,
        client.stream(
            "POST",
            "/generate",
            json={
                "input_ids": list(range(64)),
                "stream": True,
                "sampling_params": {"max_new_tokens": 64, "ignore_eos": True, "temperature": 0},
            },
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = events(response)
    assert raw[-1] == "[DONE]"
    chunks = [json.loads(item) for item in raw[:-1]]
    assert len(chunks) >= 2
    previous_tokens = 0
    previous_text = ""
    for chunk in chunks:
        meta = chunk["meta_info"]
        # Cumulative text, ids and completion_tokens (SGLang's default streaming).
        assert chunk["text"].startswith(previous_text)
        assert len(chunk["output_ids"]) == meta["completion_tokens"]
        assert meta["completion_tokens"] > previous_tokens
        assert meta["prompt_tokens"] == 64
        previous_tokens = meta["completion_tokens"]
        previous_text = chunk["text"]
    first, final = chunks[0]["meta_info"], chunks[-1]["meta_info"]
    assert first["completion_tokens"] == 1  # the prefill token
    assert first["finish_reason"] is None
    assert "e2e_latency" not in first
    assert final["finish_reason"] == {"type": "length", "length": 64}
    assert final["completion_tokens"] == 64
    assert final["e2e_latency"] > 0
    assert final["spec_verify_ct"] == len(chunks) - 1
    assert final["spec_accept_length"] == pytest.approx(64 / final["spec_verify_ct"])
    # Speculative chunks carry several tokens each.
    assert (
        max(
            b["meta_info"]["completion_tokens"] - a["meta_info"]["completion_tokens"]
            for a, b in itertools.pairwise(chunks)
        )
        > 1
    )


def test_native_non_stream_and_text_input(plain_sim):
    with plain_sim.client() as client:
        reply = client.post(
            "/generate",
            json={
                "text": "Hello there, simulator.",
                "sampling_params": {"max_new_tokens": 8, "ignore_eos": True},
            },
        )
        assert reply.status_code == 200
        body = reply.json()
        assert body["meta_info"]["completion_tokens"] == 8
        assert body["meta_info"]["prompt_tokens"] >= 1
        assert "spec_verify_ct" not in body["meta_info"]  # autoregressive
        bad = client.post("/generate", json={"sampling_params": {}})
        assert bad.status_code == 400
        garbage = client.post("/generate", content=b"{not json")
        assert garbage.status_code == 400


def test_chat_stream_with_usage_and_spec_details(ddtree_sim):
    with (
        ddtree_sim.client() as client,
        client.stream(
            "POST",
            "/v1/chat/completions",
            json={
                "model": "qwen3.6-27b",
                "messages": [{"role": "user", "content": "hi " * 40}],
                "max_tokens": 48,
                "stream": True,
                "ignore_eos": True,
                "stream_options": {"include_usage": True},
                "return_spec_tokens_details": True,
            },
        ) as response,
    ):
        raw = events(response)
    assert raw[-1] == "[DONE]"
    chunks = [json.loads(item) for item in raw[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    # Deltas always carry reasoning_content, null without a reasoning parser
    # (sglang 0.5.23 srt/entrypoints/openai/sse_utils.py:13-26).
    assert chunks[0]["choices"][0]["delta"] == {
        "reasoning_content": None,
        "role": "assistant",
        "content": "",
    }
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert all(delta["reasoning_content"] is None for delta in deltas)
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert len(content.split()) == 48
    finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finish[-1]["choices"][0]["finish_reason"] == "length"
    # sglext after the last content chunk and before the usage chunk.
    sglext = [i for i, c in enumerate(chunks) if "sglext" in c]
    usage = [i for i, c in enumerate(chunks) if c.get("usage")]
    assert len(sglext) == 1
    assert len(usage) == 1
    assert sglext[0] < usage[0] == len(chunks) - 1
    details = chunks[sglext[0]]["sglext"]["spec_tokens_details"]
    assert details["spec_verify_ct"] > 0
    assert details["spec_accept_length"] == pytest.approx(48 / details["spec_verify_ct"])
    assert chunks[usage[0]]["choices"] == []
    assert chunks[usage[0]]["usage"]["completion_tokens"] == 48


def test_completions_stream_without_usage(plain_sim):
    with (
        plain_sim.client() as client,
        client.stream(
            "POST",
            "/v1/completions",
            json={
                "prompt": "Once upon a time",
                "max_tokens": 12,
                "stream": True,
                "ignore_eos": True,
            },
        ) as response,
    ):
        raw = events(response)
    assert raw[-1] == "[DONE]"
    chunks = [json.loads(item) for item in raw[:-1]]
    assert all(c["object"] == "text_completion" for c in chunks)
    assert not any(c.get("usage") for c in chunks)
    text = "".join(c["choices"][0]["text"] for c in chunks)
    assert len(text.split()) == 12
    with plain_sim.client() as client:
        whole = client.post(
            "/v1/completions", json={"prompt": [1, 2, 3], "max_tokens": 5, "ignore_eos": True}
        ).json()
        assert whole["usage"] == {
            "prompt_tokens": 3,
            "completion_tokens": 5,
            "total_tokens": 8,
            "reasoning_tokens": 0,
        }
        # Like SGLang, a single-model server does not check the requested model name.
        other = client.post(
            "/v1/chat/completions",
            json={"model": "nope", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2},
        )
        assert other.status_code == 200
        empty = client.post("/v1/chat/completions", json={"messages": []})
        assert empty.status_code == 400


def test_info_endpoints(ddtree_sim):
    with ddtree_sim.client() as client:
        info = client.get("/model_info").json()
        assert info["model_path"] == "Qwen/Qwen3.6-27B"
        assert info["served_model_name"] == "qwen3.6-27b"
        # The VLM class SGLang loads for Qwen3.6 (sglang 0.5.23 srt/models/qwen3_5.py:3021),
        # image-capable (srt/configs/model_config.py:819-844, 2439).
        assert info["architectures"] == ["Qwen3_5ForConditionalGeneration"]
        assert info["has_image_understanding"] is True
        assert client.get("/get_model_info").json() == info
        server = client.get("/server_info").json()
        assert server["version"] == "0.5.23"
        assert server["tp_size"] == 1
        assert server["speculative_algorithm"] == "DDTREE"
        assert server["max_running_requests"] == 32
        assert server["decode_log_interval"] == 40  # a default from the real release
        assert len(server) > 500
        assert "--speculative-ddtree-budget 15" in server["launch_command"]
        assert isinstance(server["internal_states"], list)
        assert len(server["internal_states"]) == 1
        assert client.get("/get_server_info").status_code == 200
        models = client.get("/v1/models").json()
        assert models["data"][0]["id"] == "qwen3.6-27b"
        assert models["data"][0]["owned_by"] == "sglang"
    assert "'/get_model_info' is deprecated" in ddtree_sim.log()


def test_health_runs_a_generation(plain_sim):
    with plain_sim.client() as client:
        start = time.monotonic()
        assert client.get("/health").status_code == 200
        elapsed = time.monotonic() - start
        assert elapsed >= 1.0 / plain_sim.speed * 0.9
        assert client.get("/health_generate").status_code == 200
        assert client.get("/ready").status_code == 200


def test_flush_cache_resets_lifetime_accept_length(ddtree_sim):
    with ddtree_sim.client() as client:
        client.post(
            "/generate",
            json={
                "input_ids": [1] * 16,
                "sampling_params": {"max_new_tokens": 32, "ignore_eos": True},
            },
        )
        before = client.get("/server_info").json()["internal_states"][0]
        assert before["avg_spec_accept_length"] > 1
        reply = client.post("/flush_cache")
        assert reply.status_code == 200
        assert reply.text.startswith("Cache flushed.")
        after = client.get("/server_info").json()["internal_states"][0]
        assert "avg_spec_accept_length" not in after


def test_flush_cache_refused_while_busy(plain_sim):
    with (
        plain_sim.client() as client,
        client.stream(
            "POST",
            "/generate",
            json={
                "input_ids": [1] * 8,
                "stream": True,
                # About 4 s of real time at 20x: still running when the flush arrives on a
                # loaded box (400 tokens, under a second, had finished once).
                "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True},
            },
        ) as response,
    ):
        lines = response.iter_lines()
        next(line for line in lines if line.startswith("data:"))
        with httpx.Client(base_url=plain_sim.url) as other:
            busy = other.post("/flush_cache")
        assert busy.status_code == 400
        # The body is the route's default; the reason is in the scheduler's log
        # (sglang 0.5.23 srt/managers/scheduler.py:5540-5546, http_server.py:1029-1040).
        assert busy.text == "Flush cache failed.\n"
        assert "Cache not flushed because there are pending requests." in plain_sim.log()
        # Read to the end, so the module's simulator is idle for the next test.
        for _ in lines:
            pass


def parse_metrics(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_metrics_names_types_labels_and_update_rules(ddtree_sim):
    with ddtree_sim.client() as client:
        start = parse_metrics(client.get("/metrics").text)
        assert start["sglang:gen_throughput"].type == "gauge"
        assert start["sglang:realtime_tokens"].type == "counter"
        assert start["sglang:time_to_first_token_seconds"].type == "histogram"
        gauge = start["sglang:num_running_reqs"].samples[0]
        assert set(gauge.labels) == {
            "model_name",
            "engine_type",
            "tp_rank",
            "pp_rank",
            "moe_ep_rank",
        }
        assert gauge.labels["model_name"] == "qwen3.6-27b"
        # A mode's series exists once it moved: no prefix-cache hits, no prefill_cache
        # (sglang 0.5.23 srt/observability/metrics_collector.py:1558-1572).
        modes = {s.labels["mode"] for s in start["sglang:realtime_tokens"].samples}
        assert modes == {"prefill_compute", "decode"}

        def decode_total(families: dict) -> float:
            return sum(
                s.value
                for s in families["sglang:realtime_tokens"].samples
                if s.labels["mode"] == "decode"
            )

        def generation_total(families: dict) -> float:
            return sum(
                s.value
                for s in families["sglang:generation_tokens"].samples
                if s.name.endswith("_total")
            )

        with client.stream(
            "POST",
            "/generate",
            json={
                "input_ids": [1] * 32,
                "stream": True,
                "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True},
            },
        ) as response:
            seen = 0
            for line in response.iter_lines():
                if line.startswith("data: {"):
                    seen += 1
                if seen == 20:
                    break
            with httpx.Client(base_url=ddtree_sim.url) as other:
                mid = parse_metrics(other.get("/metrics").text)
        # realtime decode tokens move every step; generation tokens only at finish.
        assert decode_total(mid) > decode_total(start)
        assert generation_total(mid) == generation_total(start)
        client.post(
            "/generate",
            json={
                "input_ids": [1] * 8,
                "sampling_params": {"max_new_tokens": 16, "ignore_eos": True},
            },
        )
        # A streamed request run to its end: counted with is_streaming="true" (the one above
        # was cut off, and this test must not lean on another test's requests).
        with client.stream(
            "POST",
            "/generate",
            json={
                "input_ids": [1] * 8,
                "stream": True,
                "sampling_params": {"max_new_tokens": 4, "ignore_eos": True},
            },
        ) as response:
            for _ in response.iter_lines():
                pass
        end = parse_metrics(client.get("/metrics").text)
        assert generation_total(end) >= generation_total(start) + 16
        streaming = {s.labels.get("is_streaming") for s in end["sglang:generation_tokens"].samples}
        assert streaming == {"true", "false"}
        verify = end["sglang:spec_verify_calls"].samples[0]
        assert verify.value > 0
        assert "tp_rank" not in verify.labels  # tokenizer-side metric
        ttft = [
            s
            for s in end["sglang:time_to_first_token_seconds"].samples
            if s.name.endswith("_count")
        ]
        assert sum(s.value for s in ttft) >= 1
        assert any(s.labels.get("is_streaming") for s in ttft)
        for gauge_name in (
            "sglang:num_queue_reqs",
            "sglang:token_usage",
            "sglang:spec_accept_length",
            "sglang:spec_accept_rate",
        ):
            assert end[gauge_name].type == "gauge", gauge_name
            assert "tp_rank" in end[gauge_name].samples[0].labels, gauge_name
        # Like SGLang's, the spec gauges move once per decode-log window of steps.
        assert 0 <= end["sglang:spec_accept_rate"].samples[0].value <= 1
        for histogram in (
            "sglang:inter_token_latency_seconds",
            "sglang:e2e_request_latency_seconds",
        ):
            family = end[histogram]
            assert family.type == "histogram", histogram
            counts = [s.value for s in family.samples if s.name.endswith("_count")]
            assert sum(counts) >= 1, histogram
            buckets = [s for s in family.samples if s.name.endswith("_bucket")]
            assert any(b.labels["le"] == "+Inf" for b in buckets), histogram
        e2e_streaming = {
            s.labels.get("is_streaming")
            for s in end["sglang:e2e_request_latency_seconds"].samples
            if s.name.endswith("_count")
        }
        assert e2e_streaming == {"true", "false"}


def test_gauges_refresh_on_decode_ticks(ddtree_sim):
    with ddtree_sim.client() as client:
        client.post(
            "/generate",
            json={
                "input_ids": [1] * 8,
                "sampling_params": {"max_new_tokens": 1200, "ignore_eos": True},
            },
        )
        families = parse_metrics(client.get("/metrics").text)
    accept = families["sglang:spec_accept_length"].samples[0].value
    assert 10 < accept < 17  # DDTree budget 15 on the hybrid model commits ~15 per step
    # Idle again: the idle path publishes gen_throughput 0 at once (sglang 0.5.23
    # srt/managers/scheduler_components/metrics_reporter.py:1476-1532).
    assert families["sglang:gen_throughput"].samples[0].value == 0
    assert families["sglang:num_running_reqs"].samples[0].value == 0
    ticks = re.findall(r"gen throughput \(token/s\): ([\d.]+)", ddtree_sim.log())
    assert ticks
    assert float(ticks[-1]) > 0
    assert "Decode batch, #running-req: 1" in ddtree_sim.log()
    assert "accept len:" in ddtree_sim.log()


def test_dp_ranks_label_scheduler_metrics(tmp_path: Path):
    with running_sim([*SMALL, "--dp-size", "2"], tmp_path, speed=20) as sim, sim.client() as c:
        for _ in range(2):
            c.post(
                "/generate",
                json={
                    "input_ids": [1, 2],
                    "sampling_params": {"max_new_tokens": 4, "ignore_eos": True},
                },
            )
        families = parse_metrics(c.get("/metrics").text)
        ranks = {s.labels.get("dp_rank") for s in families["sglang:num_running_reqs"].samples}
        assert ranks == {"0", "1"}
        assert len(c.get("/server_info").json()["internal_states"]) == 2


def test_api_key_protects_generation_not_probes(tmp_path: Path):
    with running_sim([*SMALL, "--api-key", "s3cret"], tmp_path, speed=20) as sim:
        with sim.client() as client:
            denied = client.post(
                "/generate", json={"input_ids": [1], "sampling_params": {"max_new_tokens": 2}}
            )
            assert denied.status_code == 401
            assert denied.json() == {"error": "Unauthorized"}
            assert client.get("/v1/models").status_code == 401
            assert client.get("/server_info").status_code == 401
            for open_path in ("/metrics", "/ready", "/health"):
                assert client.get(open_path).status_code == 200, open_path
        with sim.client(headers={"Authorization": "Bearer s3cret"}) as client:
            allowed = client.post(
                "/generate", json={"input_ids": [1], "sampling_params": {"max_new_tokens": 2}}
            )
            assert allowed.status_code == 200
            info = client.get("/server_info").json()
            # Real /server_info serves the key in clear, in the resolved arguments and in
            # launch_command (sglang 0.5.23 srt/server_args.py:316-333, 711-719).
            assert info["api_key"] == "s3cret"
            assert "--api-key s3cret" in info["launch_command"]
        # As real SGLang, the key is in clear in the server_args line only (sglang 0.5.23
        # srt/entrypoints/engine.py:1185 logs resolved_dict() unredacted); ddconsole's waiter
        # masks it before a managed server's log reaches disk (tests/integration/test_redaction).
        leaking = [line for line in sim.log().splitlines() if "s3cret" in line]
        assert len(leaking) == 1, leaking
        assert "server_args={" in leaking[0]
        assert "'api_key': 's3cret'" in leaking[0]


def test_startup_refuses_then_binds_then_ready(tmp_path: Path):
    from tests.simproc import start_sim, stop_sim

    sim = start_sim(SMALL, tmp_path=tmp_path, speed=2)
    seen: list[object] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status: int | str
            try:
                status = httpx.get(f"{sim.url}/ready", timeout=1).status_code
            except httpx.ConnectError:
                status = "refused"
            if not seen or seen[-1] != status:
                seen.append(status)
            if status == 200:
                break
            time.sleep(0.01)
    finally:
        log = sim.log()
        stop_sim(sim)
    assert seen[0] == "refused"
    assert seen[-1] == 200
    assert set(seen) <= {"refused", 503, 200}
    milestones = [
        "Init parallel begin.",
        "Load weight begin.",
        "Load weight end.",
        "Memory pool end.",
        "Capture target decode CUDA graph end.",  # sglang 0.5.23 cuda_graph_setup.py:786
        "The server is fired up and ready to roll!",
    ]
    positions = [log.index(m) for m in milestones]
    assert positions == sorted(positions)
