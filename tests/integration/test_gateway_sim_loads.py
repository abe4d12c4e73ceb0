"""The simulator's `GET /v1/loads`, which smg's load monitor asks every worker for
(`/v1/loads?include=core,disagg,queues,memory`): SGLang 0.5.23's shape
(srt/entrypoints/v1_loads.py:96-147, srt/managers/load_snapshot.py:200-264), one load per
DP rank, the sections asked for, SGLang's answers to a bad query, and the Prometheus format."""

from __future__ import annotations

from pathlib import Path

from tests.simproc import MTP, SMALL, running_sim

CORE_KEYS = {
    "timestamp",
    "dp_rank",
    "num_running_reqs",
    "num_waiting_reqs",
    "num_waiting_uncached_tokens",
    "num_used_tokens",
    "num_total_tokens",
    "num_active_tokens",
    "num_prealloc_ready_tokens",
    "max_total_num_tokens",
    "max_running_requests",
    "token_usage",
    "gen_throughput",
    "cache_hit_rate",
    "utilization",
    "total_prefill_uncached_tokens",
    "total_prefill_busy_us",
    "decode_moments",
}

DISAGG_NULL = {
    "mode": "null",
    "prefill_bootstrap_queue_reqs": 0,
    "prefill_inflight_queue_reqs": 0,
    "decode_prealloc_queue_reqs": 0,
    "decode_transfer_queue_reqs": 0,
    "decode_retracted_queue_reqs": 0,
    "kv_transfer_speed_gb_s": 0.0,
    "kv_transfer_latency_ms": 0.0,
}
"""DisaggregationMetrics(mode="null") with its defaults (load_snapshot.py:166-177)."""


def test_loads_per_dp_rank_with_the_sections_smg_asks_for(tmp_path: Path) -> None:
    with (
        running_sim([*SMALL, "--dp-size", "2"], tmp_path) as sim,
        sim.client() as client,
    ):
        answer = client.get("/v1/loads", params={"include": "core,disagg,queues,memory"})
        assert answer.status_code == 200, answer.text
        data = answer.json()
        assert set(data) == {"timestamp", "version", "accelerator", "num_accelerators", "loads"}
        assert data["version"] == "0.5.23"
        assert data["num_accelerators"] == 1
        assert [load["dp_rank"] for load in data["loads"]] == [0, 1]
        for load in data["loads"]:
            # No LoRA, no draft: those sections absent. `disaggregation` is always built, mode
            # "null" outside PD (load_inquirer.py:184-216), so a non-PD server sends it.
            assert list(load)[-3:] == ["memory", "disaggregation", "queues"]
            assert set(load) == CORE_KEYS | {"memory", "disaggregation", "queues"}
            assert load["disaggregation"] == DISAGG_NULL
            assert load["max_total_num_tokens"] == load["memory"]["token_capacity"] > 0
            assert load["max_running_requests"] > 0
        core = client.get("/v1/loads", params={"include": "core", "dp_rank": "1"}).json()
        assert [set(load) for load in core["loads"]] == [CORE_KEYS]
        assert core["loads"][0]["dp_rank"] == 1
        assert client.get("/v1/loads", params={"dp_rank": "5"}).json()["loads"] == []
        # A bad section: to_dict's ValueError escapes the route (v1_loads.py:121-144), a bare
        # 500; with no rank's load to build, to_dict never runs and the answer is 200.
        bad = client.get("/v1/loads", params={"include": "core,bogus"})
        assert bad.status_code == 500
        assert bad.text == "Internal Server Error"
        empty = client.get("/v1/loads", params={"include": "core,bogus", "dp_rank": "5"})
        assert empty.status_code == 200
        assert empty.json()["loads"] == []
        # A non-integer dp_rank: SGLang's validation handler's 400 ErrorResponse
        # (http_server.py:635-693, protocol.py:106-111).
        invalid = client.get("/v1/loads", params={"dp_rank": "one"})
        assert invalid.status_code == 400
        error = invalid.json()
        assert set(error) == {"object", "message", "type", "param", "code"}
        assert (error["object"], error["type"], error["code"]) == ("error", "Bad Request", 400)
        assert "dp_rank" in error["message"]
        text = client.get("/v1/loads", params={"format": "prometheus"}).text
        assert "# TYPE sglang_num_running_reqs gauge" in text
        assert 'sglang_memory_token_capacity{dp_rank="1"}' in text


def test_speculative_section_once_the_draft_has_run(tmp_path: Path) -> None:
    """`speculative` appears only once a draft forward has run since the last cache flush
    (load_inquirer.py:163-174; flush_cache resets the count, scheduler.py:5518-5528,
    metrics_reporter.py:708-716); the warm-up request runs one, so a ready server has it."""
    with running_sim(MTP, tmp_path) as sim, sim.client() as client:
        assert "speculative" in client.get("/v1/loads").json()["loads"][0]
        assert client.post("/flush_cache").status_code == 200
        assert "speculative" not in client.get("/v1/loads").json()["loads"][0]
        answer = client.post(
            "/generate",
            json={"text": "hello", "sampling_params": {"max_new_tokens": 16, "ignore_eos": True}},
        )
        assert answer.status_code == 200, answer.text
        load = client.get("/v1/loads").json()["loads"][0]
        assert set(load["speculative"]) == {"accept_length", "accept_rate"}
        assert load["speculative"]["accept_length"] >= 1.0
