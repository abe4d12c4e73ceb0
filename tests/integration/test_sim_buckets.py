"""The simulator's latency histograms honour SGLang's `--bucket-*` flags, and shipped profiles
set buckets fine enough to resolve the reference box's latencies."""

from __future__ import annotations

import math
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from console.profiles.loader import ProfileCatalog
from console.sim.options import OptionsError, parse
from console.sim.stats import prepare_buckets
from tests.simproc import SMALL, running_sim

# sglang 0.5.23 srt/observability/metrics_collector.py:1965-2040 (defaults).
DEFAULT_TTFT = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
TTFT = "sglang:time_to_first_token_seconds"
ITL = "sglang:inter_token_latency_seconds"
TPOT = "sglang:request_time_per_output_token_seconds"
E2E = "sglang:e2e_request_latency_seconds"


def _bounds(sim_url: str) -> dict[str, list[float]]:
    with httpx.Client(base_url=sim_url, timeout=60) as client:
        reply = client.post(
            "/generate", json={"text": "hello", "sampling_params": {"max_new_tokens": 8}}
        )
        assert reply.status_code == 200, reply.text
        text = client.get("/metrics").text
    # The `le` bounds of each family's first series, in exposition order (duplicates kept).
    out: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        first: dict[str, str] | None = None
        for sample in family.samples:
            if not sample.name.endswith("_bucket"):
                continue
            series = {k: v for k, v in sample.labels.items() if k != "le"}
            first = series if first is None else first
            if series == first:
                out.setdefault(family.name, []).append(float(sample.labels["le"]))
    return out


def test_custom_buckets_exposed(tmp_path: Path) -> None:
    ttft = [0.01, 0.02, 0.05]
    itl = [0.003, 0.004]
    e2e = [0.5, 1.0, 2.0, 2.0]
    args = [
        *SMALL,
        "--enable-metrics",
        "--bucket-time-to-first-token", *map(str, ttft),
        "--bucket-inter-token-latency", *map(str, itl),
        "--bucket-e2e-request-latency", *map(str, e2e),
    ]  # fmt: skip
    with running_sim(args, tmp_path) as sim:
        bounds = _bounds(sim.url)
    assert bounds[TTFT] == [*ttft, math.inf]
    assert bounds[ITL] == [*itl, math.inf]
    assert bounds[TPOT] == [*itl, math.inf]
    assert bounds[E2E] == [*e2e, math.inf]


def test_default_buckets_exposed(tmp_path: Path) -> None:
    with running_sim([*SMALL, "--enable-metrics"], tmp_path) as sim:
        bounds = _bounds(sim.url)
    assert bounds[TTFT] == [*map(float, DEFAULT_TTFT), math.inf]
    assert bounds[E2E][0] == 0.1
    assert bounds[ITL][0] == 0.002


def test_bucket_flags_parse() -> None:
    opts = parse([*SMALL, "--bucket-time-to-first-token", "0.01", "0.02", "0.05"])
    assert opts.get("bucket_time_to_first_token") == [0.01, 0.02, 0.05]
    assert "--bucket-time-to-first-token" not in opts.unmodeled
    with pytest.raises(OptionsError, match="invalid float value: 'fast'"):
        parse([*SMALL, "--bucket-time-to-first-token", "fast"])


def test_unsorted_buckets_raise_like_prometheus_client() -> None:
    with pytest.raises(ValueError, match="Buckets not in sorted order"):
        prepare_buckets([0.2, 0.1])
    assert prepare_buckets([0.1, math.inf]) == [0.1]


def _flag_values(args: list[str], flag: str) -> list[float]:
    index = args.index(flag) + 1
    values: list[float] = []
    while index < len(args) and not args[index].startswith("--"):
        values.append(float(args[index]))
        index += 1
    return values


@pytest.mark.parametrize("name", ["qwen3.6-27b", "kimi-k2.6"])
@pytest.mark.parametrize(
    ("flag", "low", "high"),
    [
        ("--bucket-time-to-first-token", 0.01, 2.0),
        ("--bucket-inter-token-latency", 0.003, 0.1),
        ("--bucket-e2e-request-latency", 0.5, 120.0),
    ],
)
def test_profile_buckets_fine(name: str, flag: str, low: float, high: float) -> None:
    profile = ProfileCatalog().get(name)
    bounds = prepare_buckets(_flag_values(list(profile.profile.server.args), flag))
    assert len(bounds) <= 45
    lower = 0.0
    for upper in bounds:
        if upper > low and lower < high:
            assert (upper - lower) / upper <= 0.2 + 1e-9, (flag, lower, upper)
        lower = upper
    assert bounds[-1] >= high
