"""A rate saturation search against a simulator reports no knee above what the server
completes: each open-loop level sends rate x 30 s of arrivals with no cap on requests in
flight, and a level whose server completed under 90% of what was sent fails as `fell
behind`, whatever its latencies say.

The SLO here (E2E within 1000 s) never fails a request, so only the pace can fail a level:
with the old levels (a fixed burst of 16 requests at any rate) every rate passed up to the
limit, and the search reported rates hundreds of times the server's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli_subprocess
from tests.simproc import KIMI, QWEN, running_sim

# Closed loops to measure the server's capacity, then 6-10 rate levels of 3 s each at 10x.
pytestmark = pytest.mark.slow

WORKLOAD = ["--input-len", "64", "--output-len", "8"]
LIMIT = 400.0


def _capacity(url: str) -> float:
    """Requests per second a closed loop of 64 streams completes (its steady window)."""
    closed = run_cli_subprocess(
        "bench", "--url", url, "--concurrency", "64", "--requests", "195", *WORKLOAD,
        "--json", timeout=300,
    )  # fmt: skip
    assert closed.returncode == 0, closed.stderr[-3000:]
    (full,) = json.loads(closed.stdout)["cells"][0]["levels"]
    assert full["window"] == "steady", full
    assert full["request_s"] > 2.0, full
    return float(full["request_s"])


def test_a_rate_search_reports_no_knee_above_what_the_server_completes(tmp_path: Path) -> None:
    with running_sim(KIMI, tmp_path, speed=10) as sim:
        before = _capacity(sim.url)
        found = run_cli_subprocess(
            "bench", "--url", sim.url, "--find-max", "rate", "--rate", "2",
            "--find-max-limit", f"{LIMIT:g}", *WORKLOAD, "--slo", "e2e=1000s", "--json",
            timeout=600,
        )  # fmt: skip
        # The box's load moves the simulator's capacity: measured on both sides of the search.
        capacity = max(before, _capacity(sim.url))
    assert found.returncode == 0, found.stderr[-3000:]
    said = found.stdout + found.stderr
    cell = json.loads(found.stdout)["cells"][0]
    levels = sorted(cell["levels"], key=lambda lv: lv["level"])
    # Open loop with no cap, each level rate x 30 s of arrivals (not the 16 of --requests).
    assert all(lv["concurrency"] is None for lv in levels)
    # A level sends at least 30 s of arrivals, more when 10 E2Es take longer (a slow
    # simulator on a loaded box: search_levels.RATE_LEVEL_E2ES); a level stopped for falling
    # behind leaves its requests in flight cancelled (uncounted).
    planned = [lv["rate"] * 30 for lv in levels]
    counted = [lv["requests"] + lv["errors"] for lv in levels]
    for level, plan, count in zip(levels, planned, counted, strict=True):
        if not (level.get("early_stop") or level.get("behind")):
            assert count > plan - 1, level
    knee = cell["knee"]
    assert knee["kind"] == "rate"
    # It carries its first rate, and stops well before the limit: the knee is at most what
    # a closed loop of 64 streams completes (x1.5 for a loaded box), never the limit.
    assert knee["value"] is not None, said[-3000:]
    assert knee["first_failing"] is not None, said[-3000:]
    assert knee["value"] <= 1.5 * capacity, (knee, capacity)
    # At the knee the server completed about the rate it was offered.
    (at_knee,) = [lv for lv in levels if lv["rate"] == knee["value"]]
    assert at_knee["request_s"] >= 0.75 * knee["value"], at_knee
    behind = [lv for lv in levels if lv.get("early_stop") or lv.get("behind")]
    assert behind
    # The server (or, on a loaded box, the client sending) fell behind the offered rate; on
    # a box loaded enough, requests of an overrun level fail outright, which is the only way
    # to miss E2E <= 1000 s: the level then stops early on those failures.
    reasons = [(lv.get("behind") or lv["early_stop"], lv["errors"], lv["level"]) for lv in behind]
    assert all(
        why.startswith("fell behind: ") or (why.startswith("stopped early: ") and errors > 0)
        for why, errors, _ in reasons
    ), reasons
    assert all(not lv["slo_pass"] for lv in behind)
    # Every level judged on pace carries the rate it completed; the knee says its own.
    assert all(lv.get("achieved_rate") is not None for lv in levels if lv.get("behind")), levels
    # The lines say how levels are sized, why a level failed, and what the knee completed.
    assert "searching rate from 2/s up to 400/s (step 10%)" in said
    assert "each level sends rate x 30 s of arrivals" in said
    assert "(fails: fell behind)" in said or "(fails: stopped early)" in said, said[-3000:]
    assert knee["achieved"] == at_knee["achieved_rate"]
    assert (
        f"carries {knee['value']:g}/s (completed {knee['achieved']:.3g}/s) at E2E ≤ 1000 s" in said
    )


def test_a_rate_search_refuses_a_cap_on_requests_in_flight(tmp_path: Path) -> None:
    """A cap holds arrivals in the client, out of their TTFT: refused before any run."""
    result = run_cli_subprocess(
        "bench", "--url", "http://127.0.0.1:9", "--find-max", "rate", "--rate", "1",
        "--concurrency", "2", "--slo", "ttft=600ms", timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "--concurrency 2" in result.stderr
    assert "drop --concurrency for a rate search" in result.stderr
    assert "-> " not in result.stderr  # no run folder was made


def test_a_rate_far_above_capacity_stops_at_its_drain_limit(tmp_path: Path) -> None:
    """16/s on a server that completes about 2/s: 480 requests whose queue would drain for
    minutes. The level stops once it runs past its arrivals and as long again, as done and
    failing (`fell behind`), with the requests still in flight cancelled."""
    with running_sim(QWEN, tmp_path, speed=20) as sim:
        found = run_cli_subprocess(
            "bench", "--url", sim.url, "--find-max", "rate", "--rate", "16",
            "--find-max-limit", "16", *WORKLOAD, "--slo", "e2e=1000s", "--json",
            timeout=300,
        )  # fmt: skip
    assert found.returncode == 0, found.stderr[-3000:]
    cell = json.loads(found.stdout)["cells"][0]
    (level,) = cell["levels"]
    assert level["status"] == "done"
    assert level["early_stop"].startswith("fell behind: "), level
    assert "were due to end" in level["early_stop"]
    assert level["requests"] + level["errors"] < 480
    assert not level["slo_pass"]
    assert (cell["knee"]["value"], cell["knee"]["first_failing"]) == (None, 16.0)
