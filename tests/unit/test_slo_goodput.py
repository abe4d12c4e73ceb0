"""SLO targets as the flag, a campaign and a profile give them; requests judged as SGLang's
benchmark judges them (sglang 0.5.23 benchmark/goodput.py:25-52); goodput beside
throughput; the knee of a cell's levels."""

from __future__ import annotations

import pytest

from console.bench.knee import knee_of
from console.bench.results import CellMeta, LevelRecord, LevelSummary, RequestResult
from console.bench.slo import evaluate, met_by, parse_slo
from console.bench.spec import CampaignSpec
from console.bench.summary import summarize_level
from console.core.errors import UsageError
from console.profiles.models import BenchDefaults

AR = CellMeta(cell_id="c", algorithm="off", gpus=(0,))


def req(ttft: float, itl: float | None, e2e: float, tokens: int = 100, error: str | None = None):
    return RequestResult(
        send_wall=0.0, ttft_s=ttft, itl_s=itl, e2e_s=e2e, output_tokens=tokens, error=error
    )


@pytest.mark.parametrize(
    ("text", "ttft", "itl", "e2e"),
    [
        ("ttft=200ms,itl=40ms,e2e=20s", 0.2, 0.04, 20.0),
        ("ttft:500,tpot:50", 0.5, 0.05, None),  # SGLang's --goodput spelling, in ms
        ("e2el=1.5s", None, None, 1.5),
        (" TTFT <= 2s ", 2.0, None, None),
    ],
)
def test_targets_parse(text: str, ttft, itl, e2e) -> None:
    slo = parse_slo(text)
    assert (slo.ttft_s, slo.itl_s, slo.e2e_s) == (ttft, itl, e2e)
    assert parse_slo(slo.spec()) == slo


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "at least one target"),
        ("ttft=fast", "not a target like"),
        ("latency=3ms", "unknown metric 'latency'"),
        ("ttft=1ms,ttft=2ms", "ttft is given twice"),
        ("ttft=0ms", "positive"),
        ("ttft=2d", "not a target like"),
    ],
)
def test_bad_targets_name_the_flag_and_the_part(text: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_slo(text)
    assert caught.value.message.startswith("--slo: ")
    assert said in caught.value.message


def test_the_attainment_is_a_share() -> None:
    with pytest.raises(UsageError, match="not a share"):
        parse_slo("ttft=1s", attainment=1.5)


def test_targets_are_inclusive_and_a_failure_never_meets_them() -> None:
    slo = parse_slo("ttft=200ms,itl=40ms")
    assert met_by(slo, req(0.2, 0.04, 5.0))
    assert not met_by(slo, req(0.2001, 0.04, 5.0))
    assert not met_by(slo, req(0.1, 0.041, 5.0))
    assert not met_by(slo, req(0.1, 0.01, 5.0, error="HTTP 500"))
    # One output token: no inter-token interval, counted as 0 as SGLang does.
    assert met_by(slo, req(0.1, None, 0.1, tokens=1))


def test_attainment_counts_failures_and_each_target_alone() -> None:
    slo = parse_slo("ttft=200ms,itl=40ms")
    requests = [
        req(0.1, 0.03, 3.0),
        req(0.3, 0.03, 3.0),  # misses TTFT only
        req(0.1, 0.05, 5.0),  # misses ITL only
        req(0.1, 0.03, 3.0, error="connection refused"),
    ]
    judged = evaluate(slo, requests)
    assert (judged.met, judged.counted) == (1, 4)
    assert judged.attainment == pytest.approx(0.25)
    assert judged.met_by_metric == {"ttft": pytest.approx(0.5), "itl": pytest.approx(0.5)}
    assert judged.good_output_tokens == 100


def _level(requests: list[RequestResult], slo_text: str) -> LevelSummary:
    record = LevelRecord(cell="c", level=0, concurrency=2, started_wall=0.0, wall_s=10.0)
    return summarize_level(record, requests, AR, [], slo=parse_slo(slo_text))


def test_goodput_equals_throughput_when_every_request_meets_the_slo() -> None:
    requests = [req(0.1, 0.02, 2.0, tokens=100 + i) for i in range(6)]
    level = _level(requests, "ttft=1s,itl=50ms")
    assert level.slo_attainment == 1.0
    assert level.slo_pass is True
    assert level.goodput_tok_s == pytest.approx(level.output_tok_s)
    assert level.goodput_req_s == pytest.approx(level.request_s)


def test_goodput_falls_with_the_requests_that_miss() -> None:
    requests = [req(0.1, 0.02, 2.0, tokens=100) for _ in range(3)]
    requests += [req(2.5, 0.02, 4.0, tokens=100)]  # a TTFT over the target
    level = _level(requests, "ttft=1s")
    assert level.slo_attainment == pytest.approx(0.75)
    assert level.slo_pass is False  # under the default 95%
    assert level.output_tok_s is not None
    assert level.goodput_tok_s == pytest.approx(level.output_tok_s * 0.75)
    assert level.slo_ttft_attainment == pytest.approx(0.75)
    assert level.slo_itl_attainment is None
    assert LevelSummary.from_json(level.to_json()) == level


def _judged(concurrency: int, passed: bool | None, status: str = "done") -> LevelSummary:
    return LevelSummary(level=concurrency, concurrency=concurrency, status=status, slo_pass=passed)


def test_the_knee_is_the_highest_pass_below_the_first_failure() -> None:
    slo = parse_slo("ttft=200ms")
    levels = [_judged(1, True), _judged(2, True), _judged(4, True), _judged(8, False),
              _judged(16, True), _judged(6, True), _judged(7, False)]  # fmt: skip
    knee = knee_of(levels, slo)
    assert knee is not None
    assert (knee.value, knee.first_failing) == (6, 7)
    assert "carries 6 concurrent at TTFT ≤ 200 ms for 95% of requests, fails at 7" in knee.text()


def test_no_knee_from_one_load_and_a_failing_floor_says_so() -> None:
    slo = parse_slo("ttft=200ms")
    assert knee_of([_judged(4, True)], slo) is None
    knee = knee_of([_judged(1, False), _judged(2, False, status="failed")], slo)
    assert knee is not None
    assert knee.value is None
    assert knee.first_failing == 1
    assert knee.text().startswith("misses TTFT ≤ 200 ms for 95% of requests even at 1 concurrent")


def test_a_campaign_and_a_profile_refuse_a_bad_slo_naming_the_key() -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        CampaignSpec(name="x", profile="p", layouts=["a"], variants=["b"], slo="speed=1ms")
    with pytest.raises(ValueError, match="not a target like"):
        BenchDefaults(slo="ttft")
    assert BenchDefaults(slo="ttft=2s").slo == "ttft=2s"


def test_a_search_that_fails_at_its_first_load_still_has_a_knee() -> None:
    slo = parse_slo("ttft=200ms")
    assert knee_of([_judged(4, False)], slo) is None
    knee = knee_of([_judged(4, False)], slo, searched=True)
    assert knee is not None
    assert knee.value is None
    assert knee.first_failing == 4


def test_a_level_a_search_stopped_early_fails_whatever_its_window_says() -> None:
    requests = [req(0.1, 0.02, 2.0) for _ in range(4)]
    record = LevelRecord(
        cell="c", level=0, concurrency=2, started_wall=0.0, wall_s=10.0,
        early_stop="stopped early: 3 of 16 requests missed TTFT ≤ 200 ms",
    )  # fmt: skip
    level = summarize_level(record, requests, AR, [], slo=parse_slo("ttft=200ms"))
    assert level.slo_attainment == 1.0
    assert level.slo_pass is False
    assert level.early_stop is not None


def test_a_campaign_writes_its_slo_as_a_table_too() -> None:
    spec = CampaignSpec(
        name="x", profile="p", layouts=["a"], variants=["b"], slo={"ttft": "200ms", "itl": 40}
    )
    assert spec.slo == "ttft=200ms,itl=40"
    target = parse_slo(spec.slo)
    assert (target.ttft_s, target.itl_s) == (0.2, 0.04)
