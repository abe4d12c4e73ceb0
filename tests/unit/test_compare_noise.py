"""Run-to-run noise: standard errors from per-request figures, and the beyond-noise rule."""

from __future__ import annotations

import math
import random

import pytest

from console.bench.compare import NOISE_FLOOR, MetricValues
from console.bench.noise import mean_se, quantile_se


def test_mean_se_is_the_sample_sd_over_root_n() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    sd = math.sqrt(sum((v - 2.5) ** 2 for v in values) / 3)
    assert mean_se(values) == pytest.approx(sd / 2)
    assert mean_se([5.0]) is None


def test_quantile_se_tracks_the_spread_and_refuses_a_p99_of_few_requests() -> None:
    rng = random.Random(7)
    narrow = [rng.gauss(100.0, 1.0) for _ in range(400)]
    wide = [rng.gauss(100.0, 10.0) for _ in range(400)]
    se_narrow, se_wide = quantile_se(narrow, 0.5), quantile_se(wide, 0.5)
    assert se_narrow is not None
    assert se_wide is not None
    assert se_wide == pytest.approx(10 * se_narrow, rel=0.35)
    # The median's standard error of a normal sample: 1.2533 sd / sqrt(n).
    assert se_wide == pytest.approx(1.2533 * 10 / 20, rel=0.3)
    assert quantile_se(wide[:8], 0.99) is None  # 8 requests cannot pin a p99
    assert quantile_se(wide[:8], 0.5) is not None


def test_a_change_is_beyond_noise_only_past_both_the_errors_and_the_floor() -> None:
    # 10% apart with small errors: beyond noise, and better for a throughput.
    tok_s = MetricValues(name="output_tok_s", values=(100.0, 110.0), errors=(1.0, 1.0))
    assert tok_s.beyond_noise(1) is True
    assert tok_s.better(1) is True
    # The same change within 2 combined standard errors: noise.
    noisy = MetricValues(name="output_tok_s", values=(100.0, 110.0), errors=(5.0, 5.0))
    assert noisy.beyond_noise(1) is False
    # Tiny errors, but under the floor: noise.
    small = 100.0 * (1 + NOISE_FLOOR / 2)
    floor = MetricValues(name="ttft_p50_s", values=(100.0, small), errors=(0.01, 0.01))
    assert floor.beyond_noise(1) is False
    # A slower TTFT is worse; an unknown error gives no verdict.
    slower = MetricValues(name="ttft_p50_s", values=(0.1, 0.2), errors=(0.001, 0.001))
    assert slower.beyond_noise(1) is True
    assert slower.better(1) is False
    unknown = MetricValues(name="ttft_p99_s", values=(0.1, 0.2), errors=(None, 0.001))
    assert unknown.beyond_noise(1) is None
    # A third run compares with the first, and the two-run view stays the first pair.
    three = MetricValues(name="output_tok_s", values=(100.0, 100.5, 90.0), errors=(1, 1, 1))
    assert [three.beyond_noise(i) for i in (1, 2)] == [False, True]
    assert three.delta_pct == pytest.approx(0.5)
    assert three.change_pct(2) == pytest.approx(-10.0)
