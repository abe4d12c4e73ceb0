"""The store, counter rates, histogram windows and the Prometheus parser (pure)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from console.telemetry.derive import counter_rate, histogram_delta
from console.telemetry.prometheus import Histogram, MetricsParseError, SeriesCache, parse
from console.telemetry.quantile import Quantile, format_quantile, histogram_quantile
from console.telemetry.samples import (
    Binding,
    CostSample,
    GpuSample,
    HostSample,
    ServerSample,
    SourceStatus,
)
from console.telemetry.store import TimeSeriesStore
from tests.unit.test_source_id import gpu as gpu_sample

TEXT = """# HELP sglang:realtime_tokens_total Tokens.
# TYPE sglang:realtime_tokens_total counter
sglang:realtime_tokens_total{model_name="m",tp_rank="0",dp_rank="0",mode="decode"} 100.0
sglang:realtime_tokens_total{model_name="m",tp_rank="0",dp_rank="1",mode="decode"} 50.0
sglang:realtime_tokens_total{model_name="m",tp_rank="0",dp_rank="0",mode="prefill_compute"} 9.0
# TYPE sglang:ttft_seconds histogram
sglang:ttft_seconds_bucket{dp_rank="0",le="0.1"} 1.0
sglang:ttft_seconds_bucket{dp_rank="0",le="0.2"} 3.0
sglang:ttft_seconds_bucket{dp_rank="0",le="+Inf"} 4.0
sglang:ttft_seconds_sum{dp_rank="0"} 0.9
sglang:ttft_seconds_count{dp_rank="0"} 4.0
sglang:ttft_seconds_bucket{dp_rank="1",le="0.1"} 0.0
sglang:ttft_seconds_bucket{dp_rank="1",le="0.2"} 2.0
sglang:ttft_seconds_bucket{dp_rank="1",le="+Inf"} 2.0
sglang:ttft_seconds_sum{dp_rank="1"} 0.3
sglang:ttft_seconds_count{dp_rank="1"} 2.0
"""


def test_parse_sums_by_label_and_merges_histograms_across_ranks():
    snapshot = parse(TEXT)
    assert snapshot.total("sglang:realtime_tokens_total", mode="decode") == 150.0
    merged = snapshot.histogram("sglang:ttft_seconds")
    assert merged is not None
    assert merged.bounds == (0.1, 0.2, math.inf)
    assert merged.counts == (1.0, 5.0, 6.0)
    assert merged.total == 6.0
    assert snapshot.total("sglang:absent") is None


def test_garbage_names_the_first_bad_line():
    with pytest.raises(MetricsParseError, match=r"line 2 is not Prometheus text: '<html>"):
        parse("ok_metric 1\n<html>oops</html>\n")


def test_series_cache_reads_new_values_of_known_series_like_the_full_parser():
    names = {"sglang:realtime_tokens_total", "sglang:ttft_seconds_bucket"}
    cache = SeriesCache()
    assert cache.parse(TEXT, names).samples == parse(TEXT, names).samples
    moved = TEXT.replace("} 100.0", "} 130.5").replace('le="+Inf"} 4.0', 'le="+Inf"} 7')
    again = cache.parse(moved, names)
    assert again.samples == parse(moved, names).samples
    assert again.total("sglang:realtime_tokens_total", mode="decode") == 180.5
    everything = {*names, "sglang:ttft_seconds_sum", "sglang:ttft_seconds_count"}
    assert cache.parse(moved, everything).samples == parse(moved, everything).samples
    with_timestamp = moved.replace("} 9.0", "} 11.0 1700000000000")
    assert cache.parse(with_timestamp, names).values(
        "sglang:realtime_tokens_total", mode="prefill_compute"
    ) == [11.0]


def test_series_cache_names_a_bad_line_whether_or_not_its_series_is_known():
    cache = SeriesCache()
    names = {"ok_metric", "other"}
    cache.parse('ok_metric{a="1"} 1\n', names)
    with pytest.raises(MetricsParseError, match=r"line 2 is not Prometheus text: .*1_000"):
        cache.parse('other 2\nok_metric{a="1"} 1_000\n', names)
    with pytest.raises(MetricsParseError, match=r"line 1 is not Prometheus text: 'other{a=1} 3'"):
        cache.parse("other{a=1} 3\n", names)
    with pytest.raises(MetricsParseError, match=r"line 2 is not Prometheus text: '<html>"):
        cache.parse("ok 1\n<html>oops</html>\n", names)


def test_counter_rate_never_negative_on_reset():
    assert counter_rate(100, 150, 2.0) == 25.0
    assert counter_rate(150, 30, 1.0) == 30.0  # restarted: 30 since the restart
    assert counter_rate(None, 10, 1.0) is None
    assert counter_rate(1, 2, 0) is None


def _value(q: float, h: Histogram) -> float | None:
    found = histogram_quantile(q, h)
    return None if found is None else found.value_s


def test_quantile_interpolates_like_histogram_quantile():
    h = Histogram((0.1, 0.2, 0.4, math.inf), (0.0, 10.0, 20.0, 20.0), 20.0, 5.0)
    assert _value(0.5, h) == pytest.approx(0.2)
    assert _value(0.25, h) == pytest.approx(0.15)
    assert _value(0.99, h) == pytest.approx(0.396)
    assert histogram_quantile(0.5, Histogram((0.1, math.inf), (0.0, 0.0), 0.0, 0.0)) is None


# SGLang 0.5.23's default TTFT buckets (srt/observability/metrics_collector.py:1965-1985).
DEFAULT_TTFT = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)


def _histogram(bounds: tuple[float, ...], observations: list[float]) -> Histogram:
    every = (*bounds, math.inf)
    counts = tuple(float(sum(1 for o in observations if o <= b)) for b in every)
    return Histogram(every, counts, float(len(observations)), sum(observations))


def test_ttfts_under_the_first_default_bucket_read_as_an_interval_never_50_99():
    ttfts = [0.038 + 0.0001 * i for i in range(40)]  # 38-42 ms
    h = _histogram(DEFAULT_TTFT, ttfts)
    p50, p99 = histogram_quantile(0.5, h), histogram_quantile(0.99, h)
    assert p50 is not None
    assert p99 is not None
    assert p50.value_s == pytest.approx(0.05)
    assert p99.value_s == pytest.approx(0.099)
    assert (p50.lower_s, p50.upper_s, p50.resolved) == (0.0, 0.1, False)
    assert format_quantile(p50) == "<100 ms"
    assert format_quantile(p99) == "<100 ms"
    assert p50.to_json() == {"value_s": 0.05, "lower_s": 0.0, "upper_s": 0.1, "resolved": False}


def test_fine_buckets_resolve_the_value():
    fine = tuple(round(0.005 * i, 3) for i in range(1, 21))  # 5 ms steps to 100 ms
    h = _histogram(fine, [0.038 + 0.0001 * i for i in range(40)])
    p50 = histogram_quantile(0.5, h)
    assert p50 is not None
    assert p50.resolved
    assert (p50.lower_s, p50.upper_s) == (0.035, 0.04)
    assert 35 <= float(format_quantile(p50).removesuffix(" ms")) <= 40


def test_wide_and_open_buckets_read_as_their_bounds():
    middle = Quantile(value_s=0.15, lower_s=0.1, upper_s=0.2)
    assert not middle.resolved
    assert format_quantile(middle) == "100-200 ms"
    assert format_quantile(middle, suffix=False) == "100-200"
    above = histogram_quantile(0.99, _histogram(DEFAULT_TTFT, [500.0] * 10))
    assert above is not None
    assert above.upper_s is None
    assert format_quantile(above, unit="s") == ">400 s"
    assert above.to_json()["upper_s"] is None
    itl = Quantile(value_s=0.0598, lower_s=0.04, upper_s=0.06)  # ITL p99 in 40-60 ms
    assert format_quantile(itl) == "40-60 ms"
    assert format_quantile(Quantile.exact(0.0384)) == "38 ms"
    assert format_quantile(Quantile.exact(0.0042)) == "4.2 ms"
    assert format_quantile(None) == "-"


def test_histogram_delta_window_and_reset():
    older = Histogram((0.1, math.inf), (5.0, 10.0), 10.0, 1.0)
    newer = Histogram((0.1, math.inf), (7.0, 16.0), 16.0, 1.9)
    delta = histogram_delta(older, newer)
    assert delta is not None
    assert delta.counts == (2.0, 6.0)
    assert delta.total == 6.0
    reset = Histogram((0.1, math.inf), (1.0, 1.0), 1.0, 0.05)
    assert histogram_delta(older, reset) == reset


def test_store_is_bounded_versioned_and_immutable():
    store = TimeSeriesStore(capacity=5)
    for i in range(12):
        store.append("gpu.0.util_pct", float(i), None if i == 11 else float(i * 10))
    store.commit()
    assert store.version == 1
    window = store.window("gpu.0.util_pct")
    assert window.times == (7.0, 8.0, 9.0, 10.0, 11.0)
    assert window.values == (70.0, 80.0, 90.0, 100.0, None)
    assert store.window("gpu.0.util_pct", since=9.5).times == (10.0, 11.0)
    assert store.latest_value("gpu.0.util_pct") is None
    with pytest.raises(AttributeError):
        window.values.append(1.0)  # type: ignore[attr-defined]
    assert store.window("missing").values == ()


def test_store_caps_the_number_of_series():
    store = TimeSeriesStore(capacity=2, max_series=3)
    for i in range(5):
        store.append(f"s{i}", 0.0, 1.0)
    assert store.series_count() == 3
    assert store.dropped_series == 2


@pytest.mark.parametrize(
    "cls", [GpuSample, HostSample, ServerSample, CostSample, Binding, SourceStatus]
)
def test_samples_are_frozen(cls):
    params = dataclasses.fields(cls)
    instance = cls(**{f.name: None for f in params})
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(instance, params[0].name, 1)


def test_series_cache_stays_bounded_when_series_keep_changing():
    cache = SeriesCache(max_series=4)
    for scrape in range(10):
        text = "".join(f'm{{req="{scrape}-{i}"}} {i}\n' for i in range(3))
        assert cache.parse(text, {"m"}).total("m") == 3.0
        assert len(cache._series) <= 4


PRIORITY_TEXT = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0",priority=""} 3.0
sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0",priority="1"} 2.0
sglang:num_running_reqs{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0",priority="2"} 1.0
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0",priority=""} 3.25
# TYPE sglang:realtime_tokens_total counter
sglang:realtime_tokens_total{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0",priority="",mode="decode"} 10.0
"""  # noqa: E501  (label sets as SGLang 0.5.23 writes them, metrics_collector.py:1382-1430)


@pytest.mark.parametrize(
    ("info", "speculative", "shown"),
    [
        (None, None, 3.25),
        ({"version": "0.5.23"}, None, 3.25),  # no key: unknown, so a non-zero gauge shows
        ({"speculative_algorithm": None}, False, None),  # null: off
        ({"speculative_algorithm": "EAGLE"}, True, 3.25),
    ],
)
def test_speculation_unknown_unless_server_info_says(
    info: dict[str, object] | None, speculative: bool | None, shown: float | None
):
    from console.telemetry.sglang_source import SglangSource

    source = SglangSource("x", "http://127.0.0.1:9", None)  # type: ignore[arg-type]
    source.server_info = info
    assert source.speculative is speculative
    sample = source._sample(parse(PRIORITY_TEXT), 1.0)
    assert sample.accept_length == shown
    assert sample.running == 3.0  # the priority="" total, not 3 + 2 + 1


def test_cell_algorithm_from_server_info():
    from console.bench.cells import meta_from_server_info

    assert meta_from_server_info({"speculative_algorithm": None}).algorithm == "off"
    assert meta_from_server_info({"speculative_algorithm": "EAGLE"}).algorithm == "EAGLE"
    assert meta_from_server_info({"tp_size": 2}).algorithm is None


def test_a_link_is_narrowed_only_when_lanes_are_missing():
    full = gpu_sample(0.0, 0, 50.0)
    assert not full.link_narrowed
    assert dataclasses.replace(full, pcie_width_current=8).link_narrowed
    # Generation 1 at idle is power saving, not a narrowed link.
    assert not dataclasses.replace(full, pcie_gen_current=1).link_narrowed
    assert not dataclasses.replace(full, pcie_width_current=None).link_narrowed
