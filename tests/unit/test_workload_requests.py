"""Workloads as a benchmark or campaign asks for them: levels of a trace, names, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.bench.request import BenchRequest, CampaignRequest
from console.bench.spec import CampaignSpec
from console.bench.workload_files import check_endpoint, resolve
from console.bench.workload_kinds import MultiTurn
from console.bench.workload_trace import TraceReplay
from console.cli.services import Services
from console.core.errors import UsageError

URL = "http://127.0.0.1:9"


def test_a_trace_is_one_replay_level_at_its_mean_rate():
    trace = resolve("chat-trace", BenchRequest(url=URL).workload_spec()).source
    assert isinstance(trace, TraceReplay)
    (level,) = BenchRequest(url=URL, workload_name="chat-trace", concurrency=(4, 8)).levels()
    assert level.replay == 1.0
    assert level.requests is None  # the whole trace
    assert level.concurrency is None
    assert level.rate == pytest.approx(trace.trace.mean_rate, rel=1e-3)
    assert level.label == "trace replay"
    (fast,) = BenchRequest(url=URL, workload_name="chat-trace", replay_speed=4).levels()
    assert fast.rate == pytest.approx(4 * trace.trace.mean_rate, rel=1e-3)
    assert fast.label == "trace replay x4"
    # Other kinds keep the concurrency levels.
    levels = BenchRequest(url=URL, workload_name="multi-turn", concurrency=(4, 8)).levels()
    assert [(lv.concurrency, lv.replay) for lv in levels] == [(4, None), (8, None)]


def test_bench_request_workload_round_trips_and_resolves():
    request = BenchRequest(url=URL, workload_name="multi-turn", seed=7).validate()
    again = BenchRequest.from_json(json.loads(json.dumps(request.to_json())))
    assert again == request
    workload = again.workload()
    assert isinstance(workload.source, MultiTurn)
    assert workload.source.seed == 7
    assert request.workload_json()["workload"] == "multi-turn"
    with pytest.raises(UsageError, match="not both"):
        BenchRequest(url=URL, workload_name="chat", dataset="x.jsonl").validate()
    with pytest.raises(UsageError, match=r"^--workload nope: unknown workload"):
        BenchRequest(url=URL, workload_name="nope").validate().workload()


def test_campaign_workload_key(tmp_path: Path):
    base = {"name": "c", "profile": "p", "layouts": ["tp1"], "variants": ["off"]}
    chat = CampaignRequest(spec=CampaignSpec.model_validate({**base, "workload": "multi-turn"}))
    assert isinstance(chat.workload().source, MultiTurn)
    assert chat.workload_json()["workload"] == "multi-turn"
    spec = CampaignSpec.model_validate({**base, "workload": "mooncake-agent", "replay_speed": 2})
    (level,) = CampaignRequest(spec=spec).levels()
    assert (level.replay, level.requests) == (2.0, None)
    bad = tmp_path / "bad.jsonl"
    row = '"input_len": 3, "output_len": 1}'
    bad.write_text(f'{{"timestamp": 5, {row}\n{{"timestamp": 4, {row}\n')
    spec = CampaignSpec.model_validate({**base, "workload": str(bad)})
    with pytest.raises(UsageError) as caught:
        CampaignRequest(spec=spec).levels()
    assert str(caught.value) == (
        f'workload {bad}: line 2: "timestamp" 4 is earlier than the line before (5); '
        "a trace's timestamps must not decrease"
    )


def test_cli_refuses_a_bad_trace_before_any_run_folder(cli, tmp_path: Path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "hi"}\n')
    result = cli("bench", "--url", URL, "--trace", str(prompts))
    assert result.code != 0
    assert f"--trace {prompts}: not a trace" in result.err
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_len": 3, "output_len": 1}\n{"timestamp": 1}\n')
    result = cli("bench", "--url", URL, "--trace", str(trace))
    assert result.code != 0
    assert f'--trace {trace}: line 2: "input_len" must be a whole number' in result.err
    assert "Traceback" not in result.err
    result = cli("bench", "--url", URL, "--workload", "nope")
    assert "--workload nope: unknown workload (known: random, chat" in result.err
    runs = Services.create(demo=False).state.runs
    assert not runs.exists() or list(runs.iterdir()) == []


def test_cli_help_names_the_workload_flags(cli):
    result = cli("bench", "--help")
    assert result.code == 0
    for flag in ("--workload NAME|FILE", "--trace FILE", "--replay-speed X", "--dataset FILE"):
        assert flag in result.out


def test_find_max_refuses_a_trace():
    with pytest.raises(UsageError, match="--find-max does not apply to a trace"):
        BenchRequest(url=URL, workload_name="chat-trace", find_max="rate", slo="ttft=1s").validate()
    base = {"name": "c", "profile": "p", "layouts": ["tp1"], "variants": ["off"]}
    with pytest.raises(ValueError, match="`find_max` does not apply to a trace"):
        CampaignSpec.model_validate(
            {**base, "workload": "chat-trace", "find_max": "rate", "slo": "ttft=1s"}
        )
    # Other kinds can be searched.
    BenchRequest(url=URL, workload_name="multi-turn", find_max="rate", slo="ttft=1s").validate()


@pytest.mark.parametrize(
    ("workload", "what"),
    [
        (None, "random token ids"),
        ("chat", "chat (token ids)"),
        ("shared-prefix", "shared-prefix (token ids)"),
        ("multi-turn", "multi-turn (token ids)"),
        ("chat-trace", "trace (token ids)"),
        ("mooncake-agent", "trace (token ids)"),
    ],
)
def test_chat_endpoint_refuses_token_id_workloads(cli, workload: str | None, what: str):
    chosen = [] if workload is None else ["--workload", workload]
    result = cli("bench", "--url", URL, "--endpoint", "chat", *chosen)
    assert result.code != 0
    assert result.err.strip().endswith(
        f"--endpoint chat sends text, and this workload is {what}: use --endpoint generate or"
        " completions (they take ids as they are), or give chat text prompts (a dataset file,"
        " or the chat-prompts workload)"
    ), result.err
    assert "Traceback" not in result.err
    runs = Services.create(demo=False).state.runs
    assert not runs.exists() or list(runs.iterdir()) == []


def test_chat_endpoint_takes_text_and_other_endpoints_take_ids(tmp_path: Path):
    base = BenchRequest(url=URL).workload_spec()
    check_endpoint("chat", resolve("chat-prompts", base))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "hi"}\n')
    check_endpoint("chat", resolve(str(prompts), base))
    for endpoint in ("generate", "completions"):
        for name in ("random", "chat", "mooncake-agent"):
            check_endpoint(endpoint, resolve(name, base))


def test_campaign_chat_endpoint_refuses_token_id_workloads():
    from console.cli.runner import run_options

    base = {"name": "c", "profile": "p", "layouts": ["tp1"], "variants": ["off"]}
    spec = CampaignSpec.model_validate({**base, "endpoint": "chat", "workload": "multi-turn"})
    with pytest.raises(UsageError) as caught:
        run_options(CampaignRequest(spec=spec))
    assert str(caught.value).startswith(
        "endpoint chat sends text, and this workload is multi-turn (token ids): use endpoint"
        " generate or completions"
    )
    text = CampaignSpec.model_validate({**base, "endpoint": "chat", "workload": "chat-prompts"})
    assert run_options(CampaignRequest(spec=text)).endpoint == "chat"
