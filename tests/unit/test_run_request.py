"""Typed run requests: JSON round trips, validation with specific messages, overrides
validated again, and the request a run folder stores (including a campaign run made before
requests were stored)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.bench.launch import create_run, stored_demo, stored_request
from console.bench.request import BenchRequest, CampaignRequest, request_from_json
from console.bench.rundir import RunDir
from console.bench.runmeta import RunMeta
from console.core.errors import ConsoleError, UsageError
from tests.conftest import REPO

DEMO_CAMPAIGN = REPO / "campaigns" / "qwen-ddtree-budgets.toml"


def test_bench_request_round_trips_through_json() -> None:
    request = BenchRequest(
        url="http://127.0.0.1:9/",
        rates=(0.5, 2.0),
        concurrency=(4,),
        duration_s=3.0,
        requests=None,
        endpoint="chat",
        dataset="prompts.jsonl",
        name="r",
    )
    data = json.loads(json.dumps(request.to_json()))
    assert data["kind"] == "bench"
    assert request_from_json(data) == request
    levels = request.levels()
    assert [(lv.rate, lv.concurrency, lv.duration_s) for lv in levels] == [
        (0.5, 4, 3.0),
        (2.0, 4, 3.0),
    ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "name one target"),
        ({"server_id": "a", "url": "http://x"}, "name one target"),
        ({"server_id": "a", "requests": 0}, "--requests must be at least 1"),
        ({"server_id": "a", "duration_s": -1.0}, "--duration must be positive"),
        ({"server_id": "a", "concurrency": (0,)}, "concurrency levels must be at least 1"),
        ({"server_id": "a", "rates": (0.0,)}, "rates must be positive"),
        ({"server_id": "a", "range_ratio": 1.5}, "--range-ratio must be in (0, 1]"),
    ],
)
def test_bench_request_refuses_bad_fields(fields: dict, message: str) -> None:
    with pytest.raises(UsageError) as refused:
        BenchRequest(**fields).validate()
    assert message in refused.value.message


def test_a_damaged_stored_request_is_a_console_error() -> None:
    with pytest.raises(ConsoleError, match="unknown fields bogus"):
        request_from_json({"kind": "bench", "server_id": "a", "bogus": 1})
    with pytest.raises(ConsoleError, match="unknown kind"):
        request_from_json({"kind": "other"})
    with pytest.raises(ConsoleError, match=r"run\.json spec: name"):
        request_from_json({"kind": "campaign", "spec": {"name": ""}})


def test_campaign_overrides_are_validated_not_written_as_toml() -> None:
    request = CampaignRequest.from_file(DEMO_CAMPAIGN, gpus=(5,), port=31234)
    assert request.spec.gpus == [5]
    assert request.spec.port == 31234
    assert request.source == str(DEMO_CAMPAIGN.resolve())
    assert CampaignRequest.from_json(json.loads(json.dumps(request.to_json()))) == request
    with pytest.raises(UsageError, match="port"):
        request.placed(port=70000)


def test_chosen_cells_make_a_campaign() -> None:
    request = CampaignRequest.from_cells(
        (("qwen3.6-27b", "tp1", "off"), ("kimi-k2.6", "tp8", "eagle3")),
        concurrency=(1, 4),
        requests=8,
    )
    assert [(c.profile, c.layout, c.variant) for c in request.spec.cell_list()] == [
        ("qwen3.6-27b", "tp1", "off"),
        ("kimi-k2.6", "tp8", "eagle3"),
    ]
    assert [lv.concurrency for lv in request.levels()] == [1, 4]
    assert request.source is None


def test_a_run_stores_its_request(tmp_path: Path) -> None:
    request = BenchRequest(server_id="qwen-1", concurrency=(1, 2), requests=3)
    run = create_run(request, runs_root=tmp_path, name="b", demo=True)
    assert stored_request(run) == request
    assert stored_demo(run) is True
    meta = run.meta()
    assert meta.kind == "bench"
    assert meta.status == "created"
    assert [lv["concurrency"] for lv in meta.levels or ()] == [1, 2]


def test_a_campaign_run_from_before_requests_still_resumes(tmp_path: Path) -> None:
    """Campaign runs always stored their spec; `--resume` of such a run reads it."""
    spec = CampaignRequest.from_file(DEMO_CAMPAIGN).spec
    run = RunDir.create(
        tmp_path,
        "old",
        RunMeta(kind="campaign", status="interrupted", spec=spec.model_dump(mode="json"),
                campaign_file="/x/c.toml", fingerprint={"demo": False}),
    )  # fmt: skip
    request = stored_request(run)
    assert isinstance(request, CampaignRequest)
    assert request.spec == spec
    assert request.source == "/x/c.toml"
    assert stored_demo(run) is False
