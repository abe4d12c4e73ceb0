"""The simulator's `GET /v1/loads`, which smg's load monitor asks every worker for
(`/v1/loads?include=core,disagg,queues,memory`): SGLang 0.5.23's shape
(srt/entrypoints/v1_loads.py:96-147, srt/managers/load_snapshot.py:200-264), one load per
DP rank, the sections asked for, 400 for an unknown section, and the Prometheus format."""

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
            # No PD disaggregation, no LoRA, no speculative decoding: those sections absent.
            assert set(load) == CORE_KEYS | {"memory", "queues"}
            assert load["max_total_num_tokens"] == load["memory"]["token_capacity"] > 0
            assert load["max_running_requests"] > 0
        core = client.get("/v1/loads", params={"include": "core", "dp_rank": "1"}).json()
        assert [set(load) for load in core["loads"]] == [CORE_KEYS]
        assert core["loads"][0]["dp_rank"] == 1
        assert client.get("/v1/loads", params={"dp_rank": "5"}).json()["loads"] == []
        bad = client.get("/v1/loads", params={"include": "core,bogus"})
        assert bad.status_code == 400
        assert "Invalid include sections" in bad.json()["detail"]
        text = client.get("/v1/loads", params={"format": "prometheus"}).text
        assert "# TYPE sglang_num_running_reqs gauge" in text
        assert 'sglang_memory_token_capacity{dp_rank="1"}' in text


def test_speculative_section_with_a_draft(tmp_path: Path) -> None:
    with running_sim(MTP, tmp_path) as sim, sim.client() as client:
        load = client.get("/v1/loads").json()["loads"][0]
        assert set(load["speculative"]) == {"accept_length", "accept_rate"}
