"""Prometheus as a source, the pure parts: API envelopes, exporter name mapping, target
health to source state, PromQL built, GPU numbering."""

from __future__ import annotations

import math

import pytest

from console.telemetry.prom_api import (
    PrometheusError,
    Series,
    Target,
    parse_duration_s,
    parse_matrix,
    parse_targets,
    parse_vector,
)
from console.telemetry.prom_names import MIB, gpu_readings
from console.telemetry.prom_source import (
    by_instance,
    gpu_keys,
    gpu_numbers,
    gpu_sample,
    histogram_of,
    rank_figures,
    rate_query,
    target_state,
)
from console.telemetry.samples import SourceState

# -- API envelopes (prometheus.io/docs/prometheus/latest/querying/api/#format-overview) ------


def test_vector_answer_parses_labels_values_and_special_floats():
    body = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"instance": "a:1", "dp_rank": "0"}, "value": [1700000000.5, "12.5"]},
                {"metric": {"instance": "b:2"}, "value": [1700000000.5, "NaN"]},
                {"metric": {}, "value": [1700000000.5, "+Inf"]},
            ],
        },
    }
    series = parse_vector(body)
    assert [dict(s.labels) for s in series] == [
        {"instance": "a:1", "dp_rank": "0"},
        {"instance": "b:2"},
        {},
    ]
    assert series[0].value == 12.5
    assert series[0].t_wall == 1700000000.5
    assert math.isnan(series[1].value)
    assert series[2].value == math.inf


def test_scalar_answer_is_one_unlabelled_series():
    [only] = parse_vector(
        {"status": "success", "data": {"resultType": "scalar", "result": [1.0, "3"]}}
    )
    assert only.value == 3.0
    assert dict(only.labels) == {}


def test_error_envelope_carries_prometheus_own_words():
    body = {
        "status": "error",
        "errorType": "bad_data",
        "error": 'invalid parameter "query": 1:7: parse error: unexpected "}"',
    }
    with pytest.raises(PrometheusError, match=r"\(bad_data\): invalid parameter \"query\""):
        parse_vector(body)


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"status": "success"},
        {"status": "weird", "data": {}},
        {"status": "success", "data": {"resultType": "matrix", "result": []}},
        {"status": "success", "data": {"resultType": "vector", "result": [{"value": [1, "2"]}]}},
        {
            "status": "success",
            "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, 2]}]},
        },
        {
            "status": "success",
            "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "x"]}]},
        },
    ],
)
def test_unusable_answers_are_prometheus_errors_not_crashes(body):
    with pytest.raises(PrometheusError):
        parse_vector(body)


def test_matrix_answer_keeps_points_in_order():
    body = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": {"instance": "a:1"}, "values": [[10, "1"], [11, "2.5"]]}],
        },
    }
    [series] = parse_matrix(body)
    assert series.points == ((10.0, 1.0), (11.0, 2.5))
    with pytest.raises(PrometheusError, match="range matrix"):
        parse_matrix({"status": "success", "data": {"resultType": "vector", "result": []}})


def test_targets_answer_gives_health_error_and_interval():
    body = {
        "status": "success",
        "data": {
            "activeTargets": [
                {
                    "labels": {"instance": "127.0.0.1:8000", "job": "sglang"},
                    "scrapeUrl": "http://127.0.0.1:8000/metrics",
                    "health": "down",
                    "lastError": 'Get "http://127.0.0.1:8000/metrics": connection refused',
                    "scrapeInterval": "15s",
                },
                {"labels": {"instance": "x:1", "job": "dcgm"}, "health": "unknown"},
            ],
            "droppedTargets": [],
        },
    }
    down, unknown = parse_targets(body)
    assert down.instance == "127.0.0.1:8000"
    assert down.health == "down"
    assert "connection refused" in down.last_error
    assert down.scrape_interval_s == 15.0
    assert unknown.scrape_interval_s is None
    assert unknown.last_error == ""


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("1m", 60.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("2h", 7200.0),
        ("", None),
        ("5x", None),
        ("10", None),
    ],
)
def test_prometheus_durations(text, seconds):
    assert parse_duration_s(text) == seconds


# -- exporter names -----------------------------------------------------------------------


def _s(name: str, value: float, **labels: str) -> tuple[dict[str, str], float]:
    return {"__name__": name, **labels}, value


def test_dcgm_default_counters_map_to_console_units():
    # NVIDIA/dcgm-exporter etc/default-counters.csv: FB_* in MiB, PROF_PCIE_*_BYTES in B/s.
    common = {"instance": "node1:9400", "gpu": "3", "modelName": "NVIDIA H200", "UUID": "GPU-1"}
    [gpu] = gpu_readings(
        [
            _s("DCGM_FI_DEV_GPU_UTIL", 87, **common),
            _s("DCGM_FI_DEV_FB_USED", 1000, **common),
            _s("DCGM_FI_DEV_FB_FREE", 3000, **common),
            _s("DCGM_FI_DEV_FB_RESERVED", 96, **common),
            _s("DCGM_FI_DEV_POWER_USAGE", 412.5, **common),
            _s("DCGM_FI_DEV_GPU_TEMP", 61, **common),
            _s("DCGM_FI_DEV_SM_CLOCK", 1980, **common),
            _s("DCGM_FI_PROF_PCIE_RX_BYTES", 2.5e9, **common),
            _s("DCGM_FI_PROF_PCIE_TX_BYTES", 1.0e9, **common),
            _s("DCGM_FI_DEV_XID_ERRORS", 0, **common),  # not a reading the console shows
        ]
    )
    assert (gpu.instance, gpu.index, gpu.name) == ("node1:9400", 3, "NVIDIA H200")
    sample = gpu_sample(gpu, 3, now=5.0)
    assert sample.util_pct == 87
    assert sample.mem_used_bytes == 1000 * MIB
    assert sample.mem_total_bytes == (1000 + 3000 + 96) * MIB
    assert sample.power_w == 412.5
    assert sample.temp_c == 61
    assert sample.sm_clock_mhz == 1980
    assert sample.pcie_rx_bytes_s == 2.5e9
    assert sample.pcie_tx_bytes_s == 1.0e9
    assert sample.pcie_gen_current is None  # no exporter default gives the link


def test_nvitop_exporter_names_carry_their_unit_suffix():
    # nvitop-exporter declares unit='MiB' / 'MiBps' / 'W': prometheus_client appends it.
    common = {
        "instance": "node2:5050",
        "index": "1",
        "devicename": "NVIDIA RTX PRO 6000",
        "hostname": "h",
    }
    [gpu] = gpu_readings(
        [
            _s("gpu_utilization_Percentage", 55, **common),
            _s("gpu_memory_used_MiB", 2048, **common),
            _s("gpu_memory_total_MiB", 97887, **common),
            _s("gpu_power_usage_W", 300, **common),
            _s("gpu_power_limit_W", 600, **common),
            _s("gpu_temperature_C", 70, **common),
            _s("gpu_pcie_rx_throughput_MiBps", 10, **common),
            _s("gpu_pcie_tx_throughput_MiBps", 4, **common),
        ]
    )
    sample = gpu_sample(gpu, 1, now=0.0)
    assert gpu.name == "NVIDIA RTX PRO 6000"
    assert sample.util_pct == 55
    assert sample.mem_used_bytes == 2048 * MIB
    assert sample.mem_total_bytes == 97887 * MIB
    assert sample.power_limit_w == 600
    assert sample.pcie_rx_bytes_s == 10 * MIB
    assert sample.pcie_tx_bytes_s == 4 * MIB


def test_both_exporters_on_one_gpu_keep_dcgm_and_fill_the_rest():
    dcgm = {"instance": "n:1", "gpu": "0"}
    nvitop = {"instance": "n:1", "index": "0"}
    [gpu] = gpu_readings(
        [
            _s("gpu_utilization_Percentage", 10, **nvitop),
            _s("DCGM_FI_DEV_GPU_UTIL", 90, **dcgm),
            _s("gpu_power_limit_W", 600, **nvitop),
        ]
    )
    assert gpu.value("util_pct") == 90
    assert gpu.value("power_limit_w") == 600


def test_series_without_index_or_value_are_left_out():
    readings = gpu_readings(
        [
            _s("DCGM_FI_DEV_GPU_UTIL", 50, instance="n:1"),  # no gpu label
            _s("DCGM_FI_DEV_GPU_UTIL", math.nan, instance="n:1", gpu="1"),
            _s("DCGM_FI_DEV_GPU_UTIL", 50, instance="n:1", gpu="x"),
        ]
    )
    assert readings == []


def test_gpus_of_several_hosts_are_numbered_host_by_host():
    keys = [("b:1", 1), ("b:1", 0), ("a:1", 1), ("a:1", 0)]
    assert gpu_numbers(keys) == {("a:1", 0): 0, ("a:1", 1): 1, ("b:1", 0): 2, ("b:1", 1): 3}
    assert gpu_numbers([("a:1", 5)]) == {("a:1", 5): 5}


def test_gpu_numbers_never_move_while_exporters_come_and_go():
    numbers = gpu_numbers([("b:1", 0), ("b:1", 1)])
    assert numbers == {("b:1", 0): 0, ("b:1", 1): 1}
    # A second host appears: its GPUs follow; the first host's keep their numbers.
    numbers = gpu_numbers([("a:1", 0), ("a:1", 1), ("b:1", 0)], numbers)
    assert numbers == {("b:1", 0): 0, ("b:1", 1): 1, ("a:1", 0): 2, ("a:1", 1): 3}
    assert gpu_numbers([], numbers) == numbers


def test_gpu_history_keys_read_either_exporters_index_label():
    history = [
        Series({"instance": "n:9400", "gpu": "3"}, 1, 0),
        Series({"instance": "m:5050", "index": "0"}, 1, 0),
        Series({"instance": "m:5050"}, 1, 0),
    ]
    assert gpu_keys(history) == [("n:9400", 3), ("m:5050", 0)]


# -- target health -> source state ------------------------------------------------------------


def _target(health: str, error: str = "") -> Target:
    return Target("127.0.0.1:8000", "sglang", health, error, "http://127.0.0.1:8000/metrics", 1.0)


def test_down_target_is_stale_with_prometheus_last_error():
    state, reason = target_state(_target("down", "connection refused"), has_series=False)
    assert state is SourceState.STALE
    assert reason == "Prometheus cannot scrape http://127.0.0.1:8000/metrics: connection refused"


def test_target_states():
    assert target_state(_target("up"), has_series=True) == (SourceState.OK, None)
    assert target_state(_target("unknown"), has_series=False)[0] is SourceState.DEGRADED
    state, reason = target_state(_target("up"), has_series=False)
    assert state is SourceState.DEGRADED
    assert "no sglang: series yet" in (reason or "")
    state, reason = target_state(None, has_series=False)
    assert state is SourceState.STALE
    assert "no longer scraped" in (reason or "")
    # Down with series still answered (the last scrape's, before staleness): still stale.
    assert target_state(_target("down", "EOF"), has_series=True)[0] is SourceState.STALE


# -- queries and grouping -----------------------------------------------------------------------


def test_rate_query_states_its_window():
    expr = rate_query('sglang:realtime_tokens_total{mode="decode"}', 10.0)
    assert expr == 'sum by (instance) (rate(sglang:realtime_tokens_total{mode="decode"}[10000ms]))'


def test_gauges_group_by_instance_and_dp_rank():
    series = [
        Series({"__name__": "sglang:num_running_reqs", "instance": "a:1", "dp_rank": "0"}, 3, 0),
        Series({"__name__": "sglang:num_running_reqs", "instance": "a:1", "dp_rank": "1"}, 5, 0),
        Series(
            {"__name__": "sglang:spec_accept_length", "instance": "a:1", "dp_rank": "1"}, 2.5, 0
        ),
        Series({"__name__": "sglang:num_running_reqs", "instance": "b:2"}, 7, 0),
    ]
    snapshots = by_instance(series)
    assert set(snapshots) == {"a:1", "b:2"}
    assert snapshots["a:1"].total("sglang:num_running_reqs") == 8
    rates = [
        Series({"instance": "a:1", "dp_rank": "0"}, 100.0, 0),
        Series({"instance": "a:1", "dp_rank": "1"}, 50.0, 0),
        Series({"instance": "b:2", "dp_rank": "0"}, 999.0, 0),
    ]
    ranks = rank_figures(snapshots["a:1"], "a:1", rates)
    assert [(r.rank, r.decode_tok_s, r.running, r.accept_length) for r in ranks] == [
        (0, 100.0, 3, None),
        (1, 50.0, 5, 2.5),
    ]
    assert rank_figures(snapshots["b:2"], "b:2", []) == ()


def test_bucket_increases_become_a_histogram_per_instance():
    series = [
        Series({"instance": "a:1", "le": "0.1"}, 2, 0),
        Series({"instance": "a:1", "le": "0.5"}, 8, 0),
        Series({"instance": "a:1", "le": "+Inf"}, 10, 0),
        Series({"instance": "b:1", "le": "+Inf"}, 99, 0),
    ]
    histogram = histogram_of(series, "a:1")
    assert histogram is not None
    assert list(histogram.bounds) == [0.1, 0.5, math.inf]
    assert list(histogram.counts) == [2.0, 8.0, 10.0]
    assert histogram.total == 10
    assert histogram_of(series, "c:1") is None
